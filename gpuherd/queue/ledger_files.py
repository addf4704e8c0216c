"""The file rules of the shared ledger: directory modes, entry fields, whether an entry lives."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.base import GpuherdError
from collectors.machine.process_alive import running_process
from gpuherd.common.safe_files import user_name
from gpuherd.queue.headroom import Reservation

MAX_ENTRY_BYTES = 4096
MAX_TEXT = 256
"""Longest GPU UUID or job id an entry may carry."""
MAX_GRACE_S = 3600.0
"""The longest grace period a runner may give (`queue run --grace`): an entry that says it
counts for longer after it was written is not trusted."""
CLOCK_SLACK_S = 5.0
"""Leeway between the writer's clock and the file's change time."""
PID_MAX = 1 << 22
"""The kernel's largest pid (PID_MAX_LIMIT); a larger one overflows `kill(2)`."""
UID_MAX = (1 << 32) - 2
"""The largest uid (`(uid_t) -1` means "no uid")."""
MAX_SEEN = 100_000
"""Entry files whose first sighting is remembered; past this many, the oldest is forgotten."""
_FIELDS = {
    "gpu_uuid": str,
    "bytes": int,
    "uid": int,
    "pid": int,
    "pid_start_time": float,
    "expires_at": float,
    "job": str,
}


class LedgerError(GpuherdError):
    """The ledger cannot be used safely (bad permissions, a symlink, held too long)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, "ledger")


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One reservation file as read back, with who wrote it."""

    name: str
    gpu_uuid: str
    bytes: int
    uid: int
    pid: int
    pid_start_time: float
    expires_at: float
    job: str

    @property
    def reservation(self) -> Reservation:
        """The part the headroom decision needs."""
        return Reservation(self.gpu_uuid, self.bytes, self.job)


def parse_entry(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """An entry file's fields, or the reason it is not a valid entry."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}, "not JSON"
    except (RecursionError, ValueError):
        # Deep nesting ("[[[[...") exhausts the parser's stack; an integer past Python's digit
        # limit is a ValueError: either must cost one line, never the reader.
        return {}, "JSON nested too deeply or with a number too long to read"
    if not isinstance(body, dict) or set(body) != set(_FIELDS):
        return {}, f"not an entry (it needs exactly the keys {', '.join(sorted(_FIELDS))})"
    problem = invalid(body)
    if problem is None:
        body["pid_start_time"] = float(body["pid_start_time"])
        body["expires_at"] = float(body["expires_at"])
    return body, problem


def invalid(body: dict[str, Any]) -> str | None:
    """What is wrong with an entry's values (types, text length, counts); `None` if nothing."""
    for key, kind in _FIELDS.items():
        value = body[key]
        ok_types = (int, float) if kind is float else (kind,)
        if isinstance(value, bool) or not isinstance(value, ok_types):
            return f"{key} is not a{'n' if kind is int else ''} {kind.__name__}"
        if isinstance(value, str) and not 0 < len(value) <= MAX_TEXT:
            return f"{key} is empty or longer than {MAX_TEXT} characters"
    if body["bytes"] <= 0 or body["pid"] <= 0:
        return "bytes and pid must be positive"
    if body["pid"] > PID_MAX or body["uid"] > UID_MAX or body["uid"] < 0:
        return f"pid above {PID_MAX} or uid outside 0..{UID_MAX}"
    for key in ("pid_start_time", "expires_at"):
        try:
            finite = math.isfinite(float(body[key]))
        except OverflowError:
            finite = False
        if not finite:
            return f"{key} is not a finite number"
    return None


def judge_process(pid: int, start_time: float, uid: int) -> tuple[bool, str | None]:
    """Whether an entry's process runs (same pid, same start time, not a zombie) as `uid`.

    Returns:
        (alive, why it is not trusted): a live process of another user (pid 1 with init's start
        time, say) and one that cannot be seen (/proc mounted with `hidepid`) are not trusted,
        since nothing proves they hold a reservation of `uid`.
    """
    seen = running_process(pid, start_time)
    if seen is None:
        return False, None  # gone, a zombie, or the pid was reused by another process
    if seen.owner_uid is None:
        return False, (
            f"its process {pid} cannot be seen in /proc (mounted with hidepid?), "
            "so whose it is cannot be checked"
        )
    if seen.owner_uid != uid:
        return False, (
            f"its process {pid} belongs to {user_name(seen.owner_uid)}, not to uid {uid}"
        )
    return True, None


def doubt(body: dict[str, Any], written_at: float, gpu_totals: Mapping[str, int]) -> str | None:
    """Why a well-formed entry is not trusted (its claims exceed what any runner writes).

    Args:
        body: the entry's fields.
        written_at: the earliest of the file's change time (`st_ctime`, which its writer can
            move forward with `touch` but never back) and when this reader first saw it.
        gpu_totals: total memory per GPU UUID where known.
    """
    if body["expires_at"] > written_at + MAX_GRACE_S + CLOCK_SLACK_S:
        return (
            f"it counts until {body['expires_at']:.6g}, more than the longest grace "
            f"period ({MAX_GRACE_S:g} s) after it was written or first seen "
            f"({written_at:.0f})"
        )
    total = gpu_totals.get(body["gpu_uuid"])
    if total is not None and body["bytes"] > total:
        return (
            f"it reserves {body['bytes']} bytes on {body['gpu_uuid']}, more than that "
            f"GPU's total ({total} bytes)"
        )
    return None


def beyond_share(entries: list[LedgerEntry], gpu_totals: Mapping[str, int]) -> dict[str, str]:
    """The entries past their user's share (one GPU's total per user per GPU), and why.

    Each entry alone fits its GPU, but four of one user's, each tied to her own live process,
    could still fill it; so a user's entries count, in file-name order, while their sum on a
    GPU stays within its total. A GPU whose total is not known is not judged.
    """
    held: dict[tuple[int, str], int] = {}
    beyond: dict[str, str] = {}
    for entry in entries:
        total = gpu_totals.get(entry.gpu_uuid)
        if total is None:
            continue
        key = (entry.uid, entry.gpu_uuid)
        if held.get(key, 0) + entry.bytes > total:
            beyond[entry.name] = (
                f"with it, uid {entry.uid}'s entries on {entry.gpu_uuid} "
                f"would reserve more than that GPU's total ({total} bytes)"
            )
        else:
            held[key] = held.get(key, 0) + entry.bytes
    return beyond


class Sightings:
    """When a reader first saw each entry file, by (name, inode), for as long as it is there.

    A file's change time moves forward whenever its owner touches it; the first sighting does
    not, so an entry's lifetime is bounded however often its ctime is refreshed.
    """

    def __init__(self, limit: int = MAX_SEEN) -> None:
        self._limit = limit
        self._first: dict[tuple[str, int], float] = {}

    def first(self, name: str, inode: int, now: float) -> float:
        """When the file `name` with `inode` was first seen (`now`, if it is seen now)."""
        key = (name, inode)
        seen = self._first.get(key)
        if seen is None:
            if len(self._first) >= self._limit:
                del self._first[next(iter(self._first))]  # the oldest sighting
            seen = self._first[key] = now
        return seen

    def forget_gone(self, names: set[str]) -> None:
        """Forget the files no longer in the directory (`names` is all that is there)."""
        for key in [key for key in self._first if key[0] not in names]:
            del self._first[key]


def create_shared_dir(directory: Path) -> None:
    """Create the ledger directory with mode 1777, unless something has that name already.

    Raises:
        LedgerError: it cannot be created, or what was made was swapped before its mode was set.
    """
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        return
    except OSError as error:
        raise LedgerError(
            f"cannot create the ledger directory {directory}: {error.strerror}"
        ) from None
    # mkdir's mode passes through the umask, so the sticky, world-writable mode is set after:
    # through a descriptor of what was made, never by a path another user could have swapped
    # for a link to somewhere else in the meantime.
    replaced = f"the ledger directory {directory} was replaced right after it was created"
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise LedgerError(f"{replaced} ({error.strerror}); refusing to use it") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise LedgerError(f"{replaced}; refusing to use it")
        os.fchmod(fd, 0o1777)
    finally:
        os.close(fd)


def check_mode(where: Path, info: os.stat_result) -> None:
    """Refuse a directory others could tamper with, or one this user cannot write in."""
    if not stat.S_ISDIR(info.st_mode):
        raise LedgerError(f"the ledger directory {where} is not a directory")
    if info.st_uid not in (0, os.geteuid()):
        # The owner of a sticky directory may still delete or replace anyone's files in it.
        raise LedgerError(
            f"the ledger directory {where} belongs to {user_name(info.st_uid)}, "
            "not to root or this user, so its owner could delete anyone's "
            f"reservations; move it away and have root create it: "
            f"install -d -m 1777 {where} (or set GPUHERD_LEDGER_DIR)"
        )
    mode = stat.S_IMODE(info.st_mode)
    sticky = bool(mode & stat.S_ISVTX)
    if mode & 0o022 and not sticky:
        raise LedgerError(
            f"the ledger directory {where} is writable by other users but has no "
            f"sticky bit (mode {mode:04o}), so anyone could delete reservations; "
            f"run: chmod 1777 {where}"
        )
    if not _writable(info, mode):
        raise LedgerError(
            f"the ledger directory {where} belongs to {user_name(info.st_uid)} with "
            f"mode {mode:04o}, so this user cannot add reservations; it must be "
            f"mode 1777 (its owner or root can run: chmod 1777 {where})"
        )


def _writable(info: os.stat_result, mode: int) -> bool:
    me = os.geteuid()
    if me == 0:
        return True
    if info.st_uid == me:
        bits = mode >> 6
    elif info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        bits = mode >> 3
    else:
        bits = mode
    return bits & 0o3 == 0o3  # write and search


def owner_of(dir_fd: int, name: str) -> int | None:
    """The uid owning `name` in the directory (the name itself, not a link's target)."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid
    except OSError:
        return None


def is_link(dir_fd: int, name: str) -> bool:
    """Whether `name` in the directory is a symbolic link."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False

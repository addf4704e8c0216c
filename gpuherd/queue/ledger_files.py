"""The file rules of the shared ledger: directory modes, entry fields, whether an entry lives."""

from __future__ import annotations

import json
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from collectors.base import GpuherdError
from gpuherd.queue.headroom import Reservation

MAX_ENTRY_BYTES = 4096
MAX_TEXT = 256
"""Longest GPU UUID or job id an entry may carry."""
SAME_START_S = 0.01
"""Two start times this close are the same process (psutil's create_time is in clock ticks)."""
MAX_GRACE_S = 3600.0
"""The longest grace period a runner may give (`queue run --grace`): an entry that says it
counts for longer after it was written is not trusted."""
CLOCK_SLACK_S = 5.0
"""Leeway between the writer's clock and the file's change time."""
_FIELDS = {"gpu_uuid": str, "bytes": int, "uid": int, "pid": int, "pid_start_time": float,
           "expires_at": float, "job": str}


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
    return None


def judge_process(pid: int, start_time: float, uid: int) -> tuple[bool, str | None]:
    """Whether an entry's process runs (same pid, same start time, not a zombie) as `uid`.

    Returns:
        (alive, why it is not trusted): a live process of another user (pid 1 with init's start
        time, say) and one that cannot be seen (/proc mounted with `hidepid`) are not trusted,
        since nothing proves they hold a reservation of `uid`.
    """
    try:
        process = psutil.Process(pid)
        created = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False, None
        # The effective uid, as the owner of /proc/<pid> shows it (also for processes that
        # are not dumpable, whose /proc entry root owns).
        owner = process.uids().effective
    except psutil.ZombieProcess:
        return False, None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, None
        except PermissionError:
            pass
        return False, (f"its process {pid} cannot be seen in /proc (mounted with hidepid?), "
                       "so whose it is cannot be checked")
    if abs(created - start_time) > SAME_START_S:
        return False, None  # the pid was reused: the entry's process is gone
    if owner != uid:
        return False, f"its process {pid} belongs to {user_name(owner)}, not to uid {uid}"
    return True, None


def doubt(body: dict[str, Any], changed_at: float, gpu_totals: dict[str, int]) -> str | None:
    """Why a well-formed entry is not trusted (its claims exceed what any runner writes).

    Args:
        body: the entry's fields.
        changed_at: the file's change time (`st_ctime`), which its writer cannot set back.
        gpu_totals: total memory per GPU UUID where known.
    """
    if body["expires_at"] > changed_at + MAX_GRACE_S + CLOCK_SLACK_S:
        return (f"it counts until {body['expires_at']:.6g}, more than the longest grace "
                f"period ({MAX_GRACE_S:g} s) after it was written ({changed_at:.0f})")
    total = gpu_totals.get(body["gpu_uuid"])
    if total is not None and body["bytes"] > total:
        return (f"it reserves {body['bytes']} bytes on {body['gpu_uuid']}, more than that "
                f"GPU's total ({total} bytes)")
    return None


def check_mode(where: Path, info: os.stat_result) -> None:
    """Refuse a directory others could tamper with, or one this user cannot write in."""
    if not stat.S_ISDIR(info.st_mode):
        raise LedgerError(f"the ledger directory {where} is not a directory")
    if info.st_uid not in (0, os.geteuid()):
        # The owner of a sticky directory may still delete or replace anyone's files in it.
        raise LedgerError(f"the ledger directory {where} belongs to {user_name(info.st_uid)}, "
                          "not to root or this user, so its owner could delete anyone's "
                          f"reservations; move it away and have root create it: "
                          f"install -d -m 1777 {where} (or set GPUHERD_LEDGER_DIR)")
    mode = stat.S_IMODE(info.st_mode)
    sticky = bool(mode & stat.S_ISVTX)
    if mode & 0o022 and not sticky:
        raise LedgerError(f"the ledger directory {where} is writable by other users but has no "
                          f"sticky bit (mode {mode:04o}), so anyone could delete reservations; "
                          f"run: chmod 1777 {where}")
    if not _writable(info, mode):
        raise LedgerError(f"the ledger directory {where} belongs to {user_name(info.st_uid)} with "
                          f"mode {mode:04o}, so this user cannot add reservations; it must be "
                          f"mode 1777 (its owner or root can run: chmod 1777 {where})")


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


def user_name(uid: int) -> str:
    """`alice (uid 1001)`, or `uid 1001` for a uid without an account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


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

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


def alive(pid: int, start_time: float) -> bool:
    """Whether the process that wrote an entry still runs (same pid and same start time)."""
    try:
        process = psutil.Process(pid)
        created = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.ZombieProcess:
        return False
    except psutil.NoSuchProcess:
        # /proc mounted with hidepid hides other users' processes; kill(0) still sees them.
        # Their start time cannot be checked, so the entry counts until it expires.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    except psutil.AccessDenied:
        return True
    return abs(created - start_time) <= SAME_START_S


def check_mode(where: Path, info: os.stat_result) -> None:
    """Refuse a directory others could tamper with, or one this user cannot write in."""
    if not stat.S_ISDIR(info.st_mode):
        raise LedgerError(f"the ledger directory {where} is not a directory")
    mode = stat.S_IMODE(info.st_mode)
    sticky = bool(mode & stat.S_ISVTX)
    if mode & 0o022 and not sticky:
        raise LedgerError(f"the ledger directory {where} is writable by other users but has no "
                          f"sticky bit (mode {mode:04o}), so anyone could delete reservations; "
                          f"run: chmod 1777 {where}")
    if not _writable(info, mode):
        raise LedgerError(f"the ledger directory {where} belongs to {_user(info.st_uid)} with "
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


def _user(uid: int) -> str:
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

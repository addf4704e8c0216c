"""Whether a process still runs, and when it started: the one place that asks the kernel.

A pid alone does not name a process: once a process ends, the kernel may give its pid to the
next one. Every caller that recorded when a process started passes that start time, and a
process under the same pid that started at another time is another process (the first is gone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SAME_START_TOLERANCE_S = 0.01
"""Two start times closer than this are the same process (psutil rounds to clock ticks)."""


def process_start_time(pid: int) -> float | None:
    """When `pid` started, in Unix seconds (`psutil.Process.create_time`); `None` when gone."""
    import psutil  # here, not above: see `running_process`

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Seen:
    """A process that runs now, as far as this user can see it."""

    pid: int
    owner_uid: int | None
    """Its effective uid; `None` when it exists but cannot be looked at (`/proc` with `hidepid`)."""


def running_process(pid: int, start_time: float) -> Seen | None:
    """`pid`, when it runs now and is the process that started at `start_time`; else `None`.

    Pid reuse: a process under `pid` whose start time differs from `start_time` by more than
    `SAME_START_TOLERANCE_S` is a later process that was given the same pid, so the one asked
    about is gone (`None`). A zombie counts as gone: it has ended and only waits to be reaped.
    A process that exists but whose start time cannot be read (another user's, under
    `hidepid`) is returned with `owner_uid=None`: it runs, but nothing proves it is the one.
    """
    # psutil only when a caller asks: `collectors.roles` reaches this module through the
    # writers' tick, and the paths that must stay standard library (the container check run
    # by another user's system Python, the supervisor) import the roles too.
    import psutil

    try:
        process = psutil.Process(pid)
        created = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        # The effective uid, as the owner of /proc/<pid> shows it (also for processes that
        # are not dumpable, whose /proc entry root owns).
        owner = process.uids().effective
    except psutil.ZombieProcess:
        return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return Seen(pid, None) if pid_exists(pid) else None
    except (psutil.Error, OSError, ValueError):
        return None
    if abs(created - start_time) > SAME_START_TOLERANCE_S:
        return None
    return Seen(pid, owner)


def process_alive(pid: int, start_time: float | None = None) -> bool:
    """Whether the process `pid` (that started at `start_time`, when given) runs now.

    With `start_time`, pid reuse is caught and a zombie counts as gone (`running_process`);
    a process that cannot be looked at counts as gone too, since it cannot be shown to be the
    one. Without it, this is the kernel's `kill(pid, 0)`: a pid that another process took
    over still reads as alive, and so does a zombie. Only callers that never recorded a start
    time use that form (a lock file's pid, whose lock the kernel drops when its holder dies).
    """
    if start_time is None:
        return pid_exists(pid)
    seen = running_process(pid, start_time)
    return seen is not None and seen.owner_uid is not None


def pid_exists(pid: int) -> bool:
    """Whether any process has `pid` now (another user's included): `kill(pid, 0)`."""
    if pid <= 0:
        return False  # 0 and negative pids name process groups, not a process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, and belongs to someone else
    except OverflowError:
        return False
    return True


def proc_stat(pid: int, proc: str = "/proc") -> tuple[int, int, bool] | None:
    """(parent pid, start ticks after boot, exited) from `/proc/PID/stat`; `None` when gone.

    The cheap form for scans of many processes (no psutil object each). The start ticks with
    the pid identify a process across pid reuse. An exited process whose parent has not reaped
    it yet (a zombie) keeps its entry, and is reported as exited.
    """
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19]), fields[0] in (b"Z", b"X")
    except (IndexError, ValueError):
        return None

"""Stopping a running job: SIGTERM to its supervisor's process group, SIGKILL after a grace.

The supervisor (the job's recorder) forwards the SIGTERM to the command's process group and
closes the session once the command has ended, so a job stopped in time keeps a complete
recording. A command that ignores SIGTERM gets SIGKILL (its process group) after the grace
period, and the recorder, given as long again to close the session, gets SIGKILL last. Every
process is identified by pid and start time before it is signalled: a reused pid is never hit.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from gpuherd.common.queue_defaults import STOP_GRACE_S
from gpuherd.queue.jobs import Job
from gpuherd.queue.liveness import command_process, process_start_time, same_process

DEFAULT_GRACE_S = STOP_GRACE_S
POLL_S = 0.05
KILL_WAIT_S = 2.0
"""How long SIGKILL is given to take effect before `stop_job` returns."""

_Proc = tuple[int, float]
"""A process as `(pid, start time)`."""


def _tree(root: _Proc) -> list[_Proc]:
    """`root` and its descendants that run now, each with its start time."""
    try:
        children = psutil.Process(root[0]).children(recursive=True)
    except (psutil.Error, OSError):
        return []
    found = [
        (child.pid, started)
        for child in children
        if (started := process_start_time(child.pid)) is not None
    ]
    return [root, *found] if same_process(*root) else []


def _signal_groups(procs: list[_Proc], signum: int) -> list[int]:
    """Send `signum` to the process group of each still-running process; the groups hit."""
    groups: list[int] = []
    for pid, started in procs:
        if not same_process(pid, started):
            continue
        try:
            group = os.getpgid(pid)
            if group not in groups and group != os.getpgrp():
                os.killpg(group, signum)
                groups.append(group)
        except (ProcessLookupError, PermissionError):
            continue
    return groups


def _wait_gone(procs: list[_Proc], timeout_s: float) -> bool:
    """Wait until none of `procs` runs, at most `timeout_s`; whether they are all gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not any(same_process(pid, started) for pid, started in procs):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def _command(job: Job) -> _Proc | None:
    if not job.session_dir or job.pid_start_time is None:
        return None
    return command_process(Path(job.session_dir), job.pid_start_time)


def _kill_command(command: _Proc | None) -> bool:
    """SIGKILL the command's process group and those of its descendants; whether any was hit."""
    if command is None:
        return False
    return bool(_signal_groups(_tree(command), signal.SIGKILL))


def stop_job(job: Job, grace_s: float = DEFAULT_GRACE_S) -> str:
    """Stop a running job's processes; what was done, in words.

    SIGTERM goes to the supervisor's process group (the recorder forwards it to the command).
    If the supervisor still runs after `grace_s`, SIGKILL goes to the command's process group
    (and to the groups of processes it started elsewhere); the supervisor then has `grace_s`
    more to close the session before its own group gets SIGKILL. The command's own output
    supervisor is never killed, so the command's exit is still recorded. When the recorder is
    gone but the command it started runs on, the command gets SIGTERM, then SIGKILL.
    """
    supervisor = (job.pid, job.pid_start_time) if job.pid and job.pid_start_time else None
    if supervisor is not None and not same_process(*supervisor):
        supervisor = None
    if supervisor is None:
        command = _command(job)
        if command is None:
            if job.pid is None:
                return f"job {job.id} has no process yet: it is stopped as soon as it starts"
            return f"job {job.id} was no longer running (pid {job.pid} has ended)"
        _signal_groups([command], signal.SIGTERM)
        if _wait_gone([command], grace_s):
            return (
                f"stopped job {job.id}: SIGTERM to its command (pid {command[0]}; its "
                "recorder had already ended)"
            )
        _kill_command(command)
        return (
            f"stopped job {job.id}: SIGTERM to its command (pid {command[0]}; its recorder "
            f"had already ended), SIGKILL after {grace_s:g} s"
        )
    started = time.monotonic()
    _signal_groups([supervisor], signal.SIGTERM)
    if _wait_gone([supervisor], grace_s):
        return (
            f"stopped job {job.id}: SIGTERM to its supervisor (pid {supervisor[0]}); it "
            f"ended after {time.monotonic() - started:.1f} s"
        )
    said = (
        f"stopped job {job.id}: SIGTERM to its supervisor (pid {supervisor[0]}), SIGKILL "
        f"to its command after {grace_s:g} s"
    )
    if _kill_command(_command(job)) and _wait_gone([supervisor], grace_s):
        return said
    _signal_groups([supervisor], signal.SIGKILL)
    _wait_gone([supervisor], KILL_WAIT_S)
    return f"{said} and to the supervisor {grace_s:g} s later"

"""Whether a job's supervisor still runs, and how a job ended, from its recorded session.

A process is identified by its pid and its start time together, so a pid the kernel reused for
another process is never taken for the job's. How a job ended is read from its session
directory through the one session reader: the exit code and end time the recorder (or, when the
recorder was killed, the command's own supervisor in `command.exit.json`) wrote, the recorded
peak (`run_peaks`) and the parsers' CUDA OOM finding in `events.jsonl`.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collectors.machine.process_alive import SAME_START_TOLERANCE_S, process_start_time
from collectors.machine.process_alive import process_alive as same_process
from collectors.session.rows import SessionFormatError
from collectors.session.session_format import COMMAND_EXIT_FILE, EVENT, EVENTS_FILE, LOCK_FILE, META
from collectors.session.session_meta import (
    MAX_EVENT_BYTES,
    JsonProblem,
    is_number,
    read_command_exit,
    read_event,
    read_meta,
)
from collectors.session.session_reader import SessionReader
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.state_files import disk_full_note
from gpuherd.queue.store import QueueStore

LAUNCH_TIMEOUT_S = 60.0
"""A job still launching this long after launching began, with no supervisor and no
recording, was left behind by a runner that stopped before its command could start: it goes
back in line (`QueueStore.unlaunch`)."""
OOM_FINDING = "oom"
"""The `finding` the parsers give a CUDA out-of-memory line (`parsers.findings`)."""
LOST_WHILE_LAUNCHING = (
    "back in line: the runner stopped while launching it, before its command started"
)
NO_END_RECORDED = "its supervisor ended without recording how the command ended"
CANCELLED_BEFORE_START = "cancelled before its command started"


def recording_pid(session_dir: Path) -> int | None:
    """The pid of the recorder writing `session_dir` now, or `None` when none holds its lock.

    The recorder holds an exclusive `flock` on the session's `.lock` for as long as it runs
    (the kernel drops it when the recorder dies, even by kill -9), and writes its pid there.
    """
    path = session_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        # A shared lock for an instant: it fails only while the recorder holds its own.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
        return int(text[0]) if text and text[0].isdigit() else None
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How a recorded job ended, as its session directory tells it."""

    exit_code: int | None
    """The command's exit status (128 + N when killed by signal N); `None` when unknown."""
    ended_at: float | None
    peak_vram_bytes: int | None
    """The highest recorded memory of the job's processes on any one GPU (`run_peaks`)."""
    oom: bool
    """The job's log shows a CUDA out-of-memory error (the parsers' `oom` finding)."""
    error: str | None = None
    """Why the command could not run at all (`command not found: x`), when it could not."""


def _exit_record(session_dir: Path) -> dict[str, Any]:
    try:
        record = read_command_exit(session_dir)
    except (OSError, JsonProblem):
        return {}
    return record if isinstance(record, dict) else {}


def _meta_and_oom(session_dir: Path) -> tuple[dict[str, Any], bool]:
    try:
        reader = SessionReader(session_dir)
    except SessionFormatError:
        try:  # no usable gpu.csv (the recorder died early): the meta alone still says a lot
            return read_meta(session_dir), False
        except SessionFormatError:
            return {}, False
    oom = any(
        event.get("kind") == EVENT.finding and event.get("finding") == OOM_FINDING
        for event in reader.events()
    )
    return reader.meta, oom


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_job_end(session_dir: Path) -> JobEnd | None:
    """How the job recorded in `session_dir` ended; `None` when no end is recorded (yet)."""
    record = _exit_record(session_dir)
    meta, oom = _meta_and_oom(session_dir)
    code = _whole(meta.get(META.exit_code))
    if code is None:
        code = _whole(record.get("exit_code"))
    ended_at = meta.get(META.ended_at)
    if not is_number(ended_at):
        ended_at = record.get("ended_at") if is_number(record.get("ended_at")) else None
    if code is None and ended_at is None:
        return None
    peaks = [entry["peak_bytes"] for entry in meta.get(META.run_peaks) or ()]
    error = record.get("error")
    return JobEnd(
        exit_code=code,
        ended_at=float(ended_at) if ended_at is not None else None,
        peak_vram_bytes=max(peaks) if peaks else None,
        oom=oom,
        error=error if isinstance(error, str) else None,
    )


def command_process(session_dir: Path, not_before: float) -> tuple[int, float] | None:
    """`(pid, start time)` of the recorded command if it still runs, else `None`.

    The pid is the one of the last `start` event in `events.jsonl`; it counts only if that
    process started at `not_before` (the supervisor's start) or later, so a pid reused before
    the supervisor started is not taken for the command.
    """
    pid = None
    try:
        with (session_dir / EVENTS_FILE).open("rb") as f:
            while raw := f.readline(MAX_EVENT_BYTES + 1):
                if b'"start"' not in raw or not raw.endswith(b"\n"):
                    continue  # another kind, or a line too long (or cut short) to be an event
                try:
                    event = read_event(raw.decode("utf-8", "replace"))
                except JsonProblem:
                    continue
                if event["kind"] == EVENT.start and _whole(event.get("pid")):
                    pid = event["pid"]
    except OSError:
        return None
    if pid is None:
        return None
    started = process_start_time(pid)
    if started is None or started < not_before - SAME_START_TOLERANCE_S:
        return None
    return (pid, started) if same_process(pid, started) else None


def _supervisor_alive(job: Job) -> bool:
    if job.pid is not None and job.pid_start_time is not None:
        return same_process(job.pid, job.pid_start_time)
    return False


ENDED_UNSETTLED = "ended while no runner was running; the next `gpuherd queue run` records it"
"""Shown only while no runner holds the queue (a runner records an end within seconds)."""


def end_seen(job: Job) -> JobEnd | None:
    """How a running job ended, once its supervisor and command are gone; `None` while it runs.

    Reads only: no runner may be there to record the end (`settle_job` writes it). `queue
    ls`, `queue show` and the dashboard's Queue panel show such a job as ended, not as running
    for ever, while no runner is there to settle it.
    """
    if job.state is not JobState.RUNNING or job.pid is None or job.pid_start_time is None:
        return None
    if _supervisor_alive(job):
        return None
    session = Path(job.session_dir) if job.session_dir else None
    if (
        session is not None
        and not (session / COMMAND_EXIT_FILE).exists()
        and command_process(session, job.pid_start_time) is not None
    ):
        return None  # the recorder was killed, but the command it started runs on
    end = read_job_end(session) if session is not None else None
    return end if end is not None else JobEnd(None, None, None, False, NO_END_RECORDED)


def as_ended(job: Job, end: JobEnd, now: float) -> Job:
    """`job` as it will be recorded once settled: its end state, code, time and peak."""
    code = end.exit_code
    state = (
        JobState.CANCELLED
        if job.cancel_requested
        else JobState.DONE
        if code == 0
        else JobState.FAILED
    )
    reason = end.error or (NO_END_RECORDED if code is None else ENDED_UNSETTLED)
    return replace(
        job,
        state=state,
        exit_code=code,
        ended_at=end.ended_at if end.ended_at is not None else now,
        peak_vram_bytes=end.peak_vram_bytes,
        wait_reason=reason,
    )


def settle_job(store: QueueStore, job: Job, now: float) -> Job | None:
    """`settle_ended` for one job: the job as marked ended, or `None` if it was not."""
    if _supervisor_alive(job):
        return None
    session = Path(job.session_dir) if job.session_dir else None
    if (
        session is not None
        and job.pid_start_time is not None
        and not (session / COMMAND_EXIT_FILE).exists()
        and command_process(session, job.pid_start_time) is not None
    ):
        return None  # the recorder was killed, but the command it started runs on
    if job.pid is None:
        if job.started_at is not None and now - job.started_at < LAUNCH_TIMEOUT_S:
            return None  # the runner is starting it right now
        if session is not None and recording_pid(session) is not None:
            return None  # it runs: the runner adopts it
    end = read_job_end(session) if session is not None else None
    if end is None and job.pid is None and not job.cancel_requested:
        # The launch gate never let its command start: back in line, never lost, never twice.
        store.unlaunch(job.id, LOST_WHILE_LAUNCHING)
        return None
    reason = None
    if end is None and job.cancel_requested:
        reason = CANCELLED_BEFORE_START
    elif end is None:
        reason = LOST_WHILE_LAUNCHING if job.pid is None else NO_END_RECORDED
        full = disk_full_note(session) if session is not None else None
        reason += f": {full}" if full else ""
    elif end.error:
        reason = end.error
    code = end.exit_code if end is not None else None
    if job.cancel_requested:
        state = JobState.CANCELLED
    else:
        state = JobState.DONE if code == 0 else JobState.FAILED
    ended_at = end.ended_at if end is not None and end.ended_at is not None else now
    peak = end.peak_vram_bytes if end is not None else None
    if not store.mark_ended(job.id, state, code, ended_at, peak, reason=reason):
        return None  # another process settled it first
    return store.get(job.id)


def settle_ended(store: QueueStore, now: float) -> list[Job]:
    """Mark ended every launching or running job whose supervisor is gone; the jobs marked.

    The state comes from the recorded end: cancelled if a cancel was asked for, done on exit
    code 0, failed otherwise (also when no end was recorded). A job still launching with no
    supervisor after `LAUNCH_TIMEOUT_S` and no live recording goes back in line
    (`LOST_WHILE_LAUNCHING`); it is not among the jobs returned.
    Safe to call from several processes at once: each job is marked by exactly one.
    """
    settled = []
    for job in store.jobs((JobState.LAUNCHING, JobState.RUNNING)):
        done = settle_job(store, job, now)
        if done is not None:
            settled.append(done)
    return settled

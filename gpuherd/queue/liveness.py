"""Whether a job's supervisor still runs, and how a job that stopped ended."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import psutil

from collectors.session_format import COMMAND_EXIT_FILE, EVENTS_FILE, META_FILE
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.store import QueueStore

SAME_START_S = 0.01
LAUNCH_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How a recorded job ended, from its session directory."""

    exit_code: int | None
    ended_at: float | None
    peak_vram_bytes: int | None
    oom: bool


def process_start_time(pid: int) -> float | None:
    """The create time (psutil) of `pid`, or None when it does not run."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def same_process(pid: int, start_time: float) -> bool:
    """Whether `pid` runs and started at `start_time` (a reused pid is not the same)."""
    started = process_start_time(pid)
    if started is None or abs(started - start_time) > SAME_START_S:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def _json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_job_end(session_dir: Path) -> JobEnd | None:
    """Exit code, end time, peak and OOM finding of a job's session; None if it never ran."""
    record = _json(session_dir / COMMAND_EXIT_FILE) or {}
    meta = _json(session_dir / META_FILE) or {}
    if not record and not meta:
        return None
    code = record.get("exit_code", meta.get("exit_code"))
    ended = record.get("ended_at", meta.get("ended_at"))
    listed = meta.get("run_peaks")
    peaks: list[int] = [p["peak_bytes"] for p in (listed if isinstance(listed, list) else [])
                        if isinstance(p, dict) and isinstance(p.get("peak_bytes"), int)]
    oom = False
    try:
        with (session_dir / EVENTS_FILE).open(encoding="utf-8", errors="replace") as f:
            oom = any('"finding": "oom"' in line for line in f)
    except OSError:
        pass
    return JobEnd(code if isinstance(code, int) else None,
                  float(ended) if isinstance(ended, (int, float)) else None,
                  max(peaks) if peaks else None, oom)


def settle_ended(store: QueueStore, now: float) -> list[Job]:
    """Mark ended the running/launching jobs whose supervisor is gone; the jobs marked."""
    marked: list[Job] = []
    for job in store.jobs([JobState.LAUNCHING, JobState.RUNNING]):
        if job.pid is None:
            if job.state is JobState.LAUNCHING and now - job.created_at > LAUNCH_TIMEOUT_S \
                    and store.mark_ended(job.id, JobState.FAILED, None, now, None):
                marked.append(store.get(job.id))
            continue
        if job.pid_start_time is not None and same_process(job.pid, job.pid_start_time):
            continue
        end = read_job_end(Path(job.session_dir)) if job.session_dir else None
        code = end.exit_code if end else None
        state = (JobState.CANCELLED if job.cancel_requested else
                 JobState.DONE if code == 0 else JobState.FAILED)
        if store.mark_ended(job.id, state, code, (end.ended_at if end else None) or now,
                            end.peak_vram_bytes if end else None):
            marked.append(store.get(job.id))
    return marked

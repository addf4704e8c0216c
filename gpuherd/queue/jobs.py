"""The queue's shared types: a job's spec, its state and the job as stored."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class JobState(str, enum.Enum):
    """Where a job is in its life; the value is what `queue ls` shows."""

    WAITING = "waiting"
    LAUNCHING = "launching"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
"""States a job never leaves (but for an OOM retry, which requeues a failed job)."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the user asked for with `queue add`."""

    argv: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...] = ()
    name: str | None = None
    gpus: int = 1
    vram_bytes: int = 0
    """The need per GPU, bytes, margin NOT included."""
    max_util_pct: float = 10.0
    after: int | None = None
    """Job id that must be DONE first."""
    retry_oom: bool = False


@dataclass(frozen=True, slots=True)
class Job:
    """One queued job as stored, with what the runner learnt about it."""

    id: int
    position: int
    """Queue order among waiting jobs (smaller first)."""
    spec: JobSpec
    state: JobState
    created_at: float
    attempts: int = 0
    """Launches so far (an OOM retry makes it 2)."""
    gpu_uuids: tuple[str, ...] = ()
    gpu_indices: tuple[int, ...] = ()
    session_dir: str | None = None
    pid: int | None = None
    """The job's supervisor (its recorder process)."""
    pid_start_time: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    peak_vram_bytes: int | None = None
    cancel_requested: bool = False
    wait_reason: str | None = None
    owner_uid: int = 0

"""The queue's shared types: a job's spec (what the person asked for) and its state."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpuherd.queue.defaults import MAX_UTIL_PCT


class JobState(str, enum.Enum):
    """Where a job is in its life; the last three are final."""

    WAITING = "waiting"
    LAUNCHING = "launching"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
"""States a job never leaves (except a `--retry-oom` requeue of a failed one)."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What `gpuherd queue add` was asked to run, and on what."""

    argv: tuple[str, ...]
    """The command and its arguments, as given after `--`."""
    cwd: str
    """The absolute directory the command runs in."""
    env: tuple[tuple[str, str], ...] = ()
    """The command's environment: the one `queue add` ran in, with `--env` applied, sorted."""
    name: str | None = None
    gpus: int = 1
    """How many GPUs the job gets (each must have the room)."""
    vram_bytes: int = 0
    """The need per GPU, bytes, margin NOT included."""
    max_util_pct: float = MAX_UTIL_PCT
    """A GPU busier than this (over the settle period) does not qualify."""
    after: int | None = None
    """Job id that must be DONE first."""
    retry_oom: bool = False
    """Requeue once with a larger need when the job dies of CUDA OOM."""


@dataclass(frozen=True, slots=True)
class Job:
    """One job of the queue as stored: its spec and what happened to it so far."""

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
    """The supervisor's `psutil.Process.create_time()`: with `pid`, its identity."""
    started_at: float | None = None
    """When launching began; when the supervisor started, once it runs."""
    ended_at: float | None = None
    exit_code: int | None = None
    peak_vram_bytes: int | None = None
    """The recorded peak of the job's own processes (max over its GPUs)."""
    cancel_requested: bool = False
    wait_reason: str | None = None
    """For a waiting job, why it waits, in words; for a failed one, why it failed when the
    exit code alone does not say (it never started, the runner stopped while launching)."""
    owner_uid: int = 0

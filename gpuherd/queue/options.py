"""Typed options of `gpuherd queue ACTION`, as the command line hands them to the queue."""

from __future__ import annotations

from dataclasses import dataclass

from gpuherd.queue.defaults import MAX_UTIL_PCT, STOP_GRACE_S


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """`queue add|ls|show|rm|cancel|pause|resume|move` (`queue run` passes its values alone)."""

    queue_command: str
    job: int = 0
    """The job an action names (a required argument of each action that names one)."""
    json: bool = False
    show_secrets: bool = False
    to: int = 0
    grace: float = STOP_GRACE_S
    name: str | None = None
    gpus: int = 1
    vram: str | None = None
    max_util: float = MAX_UTIL_PCT
    cwd: str | None = None
    env: tuple[str, ...] = ()
    after: int | None = None
    retry_oom: bool = False
    child_command: tuple[str, ...] = ()
    slurm: bool = False
    """`add --slurm`: hand the job to Slurm (`cancel --slurm`: JOB is a Slurm job id)."""
    partition: str | None = None
    time: str | None = None
    record_dir: str | None = None

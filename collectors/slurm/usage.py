"""What each Slurm job uses of its GPUs, and GPUs a job holds idle: pure, over one GPU tick."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.samples import GpuTick
from collectors.slurm.samples import SlurmJob, SlurmTick

IDLE_AFTER_S = 30 * 60.0
"""A job's GPU idle (no process, or 0 % utilization) this long is a finding."""


@dataclass(frozen=True, slots=True)
class JobGpuUse:
    """One job's GPUs in one tick: memory in use and mean utilization."""

    gpu_indexes: tuple[int, ...]
    memory_used_bytes: int | None
    gpu_util_pct: float | None


def job_gpus(job: SlurmJob, slurm: SlurmTick, gpus: GpuTick | None) -> tuple[int, ...]:
    """The job's GPUs: Slurm's allocation, else the GPUs its processes run on."""
    if job.gpu_indexes is not None:
        return job.gpu_indexes
    pids = {p.pid for p in slurm.processes if p.job_id == job.job_id}
    return tuple(
        d.index
        for d in (gpus.devices if gpus else ())
        if any(p.pid in pids for p in d.processes or ())
    )


def job_gpu_use(job: SlurmJob, slurm: SlurmTick, gpus: GpuTick | None) -> JobGpuUse:
    """Memory used on the job's GPUs (summed) and their mean utilization."""
    indexes = job_gpus(job, slurm, gpus)
    devices = [d for d in (gpus.devices if gpus else ()) if d.index in indexes and not d.error]
    memory = [d.memory_used_bytes for d in devices if d.memory_used_bytes is not None]
    utils = [d.gpu_util_pct for d in devices if d.gpu_util_pct is not None]
    return JobGpuUse(
        indexes, sum(memory) if memory else None, sum(utils) / len(utils) if utils else None
    )


def idle_gpus(slurm: SlurmTick, gpus: GpuTick) -> set[tuple[str, int]]:
    """(job id, GPU index) of every allocated GPU with no process or 0 % utilization now."""
    by_index = {d.index: d for d in gpus.devices if not d.error}
    idle: set[tuple[str, int]] = set()
    for job in slurm.jobs:
        if job.state != "RUNNING":
            continue
        for index in job.gpu_indexes or ():
            device = by_index.get(index)
            if device is None:
                continue
            if device.processes == () or device.gpu_util_pct == 0:
                idle.add((job.job_id, index))
    return idle


class IdleWatch:
    """How long each job has held each of its GPUs idle; a finding once past `after_s`."""

    def __init__(self, after_s: float = IDLE_AFTER_S) -> None:
        self.after_s = after_s
        self._since: dict[tuple[str, int], float] = {}

    def update(self, slurm: SlurmTick, gpus: GpuTick, now: float) -> list[str]:
        """Feed one tick; the findings (one line each) of GPUs idle at least `after_s`."""
        idle = idle_gpus(slurm, gpus)
        self._since = {key: self._since.get(key, now) for key in idle}
        return [
            f"job {job_id} ({_owner(slurm, job_id)}) has held GPU {index} idle for "
            f"{_minutes(now - since)}"
            for (job_id, index), since in sorted(self._since.items())
            if now - since >= self.after_s
        ]


def _owner(slurm: SlurmTick, job_id: str) -> str:
    job = slurm.job(job_id)
    return f"{job.user}, {job.name}" if job else "?"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min"

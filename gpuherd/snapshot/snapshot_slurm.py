"""The Slurm part of `gpuherd snapshot`: the jobs on this node, their GPUs, each process's job."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from collectors.base import CollectorError, CollectorUnavailable
from collectors.machine.host import PidWatch
from collectors.samples import GpuTick
from collectors.slurm.collector import SlurmCollector
from collectors.slurm.samples import SlurmTick
from collectors.slurm.usage import job_gpu_use
from gpuherd.present import format as fmt


@dataclass(frozen=True, slots=True)
class SlurmLook:
    """One reading of Slurm, or why there is none."""

    tick: SlurmTick | None = None
    error: str | None = None
    absent: bool = True
    """No Slurm on this machine: the snapshot says nothing of it."""


def look_at_slurm(pids: Iterable[int]) -> SlurmLook:
    """Read Slurm once for this node, naming the jobs of `pids`."""
    collector = SlurmCollector(PidWatch(pids))
    try:
        collector.open()
        return SlurmLook(collector.sample(), absent=False)
    except CollectorUnavailable as unavailable:
        return SlurmLook(error=unavailable.msg)
    except CollectorError as failure:
        return SlurmLook(error=failure.msg, absent=False)
    finally:
        collector.close()


def slurm_json(look: SlurmLook, gpus: GpuTick | None) -> dict[str, Any] | None:
    """The `slurm` object of docs/snapshot-json.md; `None` without Slurm here."""
    if look.absent:
        return None
    tick = look.tick
    return {
        "node": tick.node if tick else None,
        "error": look.error,
        "jobs": [_job_json(job, tick, gpus) for job in tick.jobs] if tick else [],
    }


def _job_json(job: Any, tick: SlurmTick, gpus: GpuTick | None) -> dict[str, Any]:
    use = job_gpu_use(job, tick, gpus)
    return {
        "job_id": job.job_id,
        "array_id": job.array_id,
        "user": job.user,
        "name": job.name,
        "partition": job.partition,
        "state": job.state,
        "elapsed_s": job.elapsed_s,
        "time_limit_s": job.time_limit_s,
        "time_left_s": job.time_left_s,
        "gpus_requested": job.gpus_requested,
        "gpu_indexes": list(use.gpu_indexes),
        "gpus_from_slurm": job.gpu_indexes is not None,
        "gpu_memory_used_bytes": use.memory_used_bytes,
        "gpu_util_pct": None if use.gpu_util_pct is None else round(use.gpu_util_pct, 2),
    }


def add_process_jobs(gpus_json: list[dict[str, Any]], look: SlurmLook) -> None:
    """Give every listed process its `slurm_job` and `slurm_step` (null outside a job)."""
    tick = look.tick
    for gpu in gpus_json:
        for process in gpu.get("processes") or ():
            found = tick.job_of(process["pid"]) if tick else None
            process["slurm_job"] = found.job_id if found else None
            process["slurm_step"] = found.step if found else None


def process_job(look: SlurmLook, pid: int) -> str:
    """`job 4711.0 ` before a process's command in the table ('' outside a job)."""
    found = look.tick.job_of(pid) if look.tick else None
    return f"{found.label} " if found else ""


def slurm_lines(look: SlurmLook, gpus: GpuTick | None) -> list[str]:
    """The readable table of jobs here (empty without Slurm)."""
    if look.absent:
        return []
    if look.tick is None:
        return [f"slurm: {look.error}"]
    if not look.tick.jobs:
        return [f"slurm: no job on node {look.tick.node}"]
    lines = [f"slurm jobs on node {look.tick.node}:"]
    for job in look.tick.jobs:
        use = job_gpu_use(job, look.tick, gpus)
        shown = ",".join(map(str, use.gpu_indexes)) or "-"
        left = fmt.NA if job.time_left_s is None else _hms(job.time_left_s)
        lines.append(
            f"  job {job.shown_id}  {fmt.visible(job.user)}  {fmt.visible(job.name)}  "
            f"{job.partition}  {job.state}  GPUs {shown}  "
            f"VRAM {fmt.fmt_bytes(use.memory_used_bytes)}  "
            f"util {fmt.fmt_pct(use.gpu_util_pct)}  left {left}"
        )
    return lines


def _hms(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"

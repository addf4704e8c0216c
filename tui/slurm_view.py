"""The Slurm panel's rows and findings, from the newest Slurm tick and GPU tick (no Textual)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.samples import GpuTick
from collectors.slurm.samples import SlurmTick
from collectors.slurm.usage import IdleWatch, job_gpu_use
from gpuherd.present.format import NA, fmt_bytes, fmt_pct, visible

NONE = "-"
STATE_STYLES = {"RUNNING": "green", "SUSPENDED": "yellow", "COMPLETING": "dim"}


@dataclass(frozen=True, slots=True)
class SlurmRow:
    """One job's cells as text, keyed by its job id."""

    key: str
    cells: tuple[tuple[str, str], ...]
    style: str = ""


def latest_slurm(samples: Sequence[Any]) -> SlurmTick | None:
    """The newest Slurm tick among a role's samples."""
    ticks = [s for s in samples if isinstance(s, SlurmTick)]
    return max(ticks, key=lambda t: t.taken_at) if ticks else None


def job_labels(tick: SlurmTick | None) -> dict[int, str]:
    """Each mapped pid and its `job 4711.0`, for the process table."""
    return {p.pid: p.label for p in tick.processes} if tick else {}


def _left(seconds: int | None) -> str:
    if seconds is None:
        return NA
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def slurm_rows(tick: SlurmTick, gpus: GpuTick | None) -> tuple[SlurmRow, ...]:
    """One row per job on this node, as `squeue` lists them."""
    rows = []
    for job in tick.jobs:
        use = job_gpu_use(job, tick, gpus)
        rows.append(
            SlurmRow(
                job.job_id,
                (
                    ("job", job.shown_id),
                    ("user", visible(job.user)),
                    ("name", visible(job.name)),
                    ("partition", visible(job.partition)),
                    ("state", job.state),
                    ("gpus", ",".join(map(str, use.gpu_indexes)) or NONE),
                    ("vram", fmt_bytes(use.memory_used_bytes) if use.gpu_indexes else NONE),
                    ("util", fmt_pct(use.gpu_util_pct) if use.gpu_indexes else NONE),
                    ("left", _left(job.time_left_s)),
                ),
                STATE_STYLES.get(job.state, ""),
            )
        )
    return tuple(rows)


class SlurmView:
    """What the panel shows: rows, title, and the idle-GPU findings (which need every tick)."""

    def __init__(self, idle: IdleWatch | None = None) -> None:
        self.idle = idle or IdleWatch()
        self.findings: list[str] = []
        self._fed: tuple[float, float] | None = None

    def update(self, tick: SlurmTick, gpus: GpuTick | None, now: float) -> tuple[SlurmRow, ...]:
        """Feed the newest ticks (each pair once) and return the rows."""
        fed = (tick.taken_at, gpus.taken_at if gpus else 0.0)
        if gpus is not None and fed != self._fed:
            self._fed = fed
            self.findings = self.idle.update(tick, gpus, now)
        return slurm_rows(tick, gpus)

    @staticmethod
    def title(tick: SlurmTick) -> str:
        """`Slurm node gpu01: 3 jobs, 5 GPUs allocated`."""
        gpus = sum(len(j.gpu_indexes or ()) for j in tick.jobs)
        jobs = "1 job" if len(tick.jobs) == 1 else f"{len(tick.jobs)} jobs"
        return f"Slurm node {visible(tick.node)}: {jobs}, {gpus} GPUs allocated"

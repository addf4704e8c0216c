"""What a recording keeps of Slurm: `slurm.csv` (changes only) and the job it runs in (meta)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from collectors.session.session_format import SLURM_COLUMNS, SLURM_FILE
from collectors.slurm.samples import SlurmJob, SlurmTick


class RowWriter(Protocol):
    """The part of the session writer this needs."""

    def append_rows(self, file_name: str, columns: Any, rows: Any) -> None:
        """Append rows to a further CSV file of the session."""


def slurm_meta(env: Mapping[str, str]) -> dict[str, Any]:
    """`{"slurm": {...}}` for meta.json when the recording runs inside a Slurm job, else `{}`."""
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return {}
    array = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    return {
        "slurm": {
            "job_id": job_id,
            "array_id": f"{array[0]}_{array[1]}" if all(array) else None,
            "step": env.get("SLURM_STEP_ID") or "batch",
            "node": env.get("SLURMD_NODENAME"),
            "gpus": env.get("SLURM_JOB_GPUS") or env.get("SLURM_STEP_GPUS"),
        }
    }


def _job_cells(job: SlurmJob) -> tuple[object, ...]:
    return (
        job.job_id,
        job.array_id,
        job.user,
        job.name,
        job.partition,
        job.state,
        job.time_limit_s,
        " ".join(map(str, job.gpu_indexes or ())),
    )


class SlurmRecord:
    """Turns Slurm ticks into `slurm.csv` rows: a job's row only when it appears or changes."""

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[object, ...]] = {}
        self._pids: set[tuple[int, str]] = set()

    def rows(self, tick: SlurmTick) -> list[tuple[object, ...]]:
        """The rows this tick adds."""
        out: list[tuple[object, ...]] = []
        t = tick.taken_at
        now = {job.job_id: _job_cells(job) for job in tick.jobs}
        for job_id, cells in now.items():
            if self._jobs.get(job_id) != cells:
                out.append((t, "job", *cells, None, None))
        for job_id in self._jobs.keys() - now.keys():
            out.append(
                (t, "gone", *self._jobs[job_id][:5], "GONE", *self._jobs[job_id][6:], None, None)
            )
        self._jobs = now
        for process in tick.processes:
            if (process.pid, process.job_id) not in self._pids:
                self._pids.add((process.pid, process.job_id))
                job = now.get(process.job_id, (process.job_id,) + (None,) * 7)
                out.append((t, "process", *job, process.pid, process.step))
        return out

    def __call__(self, writer: RowWriter, tick: SlurmTick) -> None:
        """The recorder's handler for a Slurm tick."""
        rows = self.rows(tick)
        if rows:
            writer.append_rows(SLURM_FILE, SLURM_COLUMNS, rows)

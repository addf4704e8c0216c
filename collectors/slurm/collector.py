"""The Slurm collector: the jobs on this node, their GPUs, and the job of every GPU process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from collectors.base import CollectorError, CollectorUnavailable
from collectors.host import PidWatch
from collectors.slurm.commands import node_name, run_slurm, slurm_missing
from collectors.slurm.parse import SQUEUE_FORMAT, gpu_indexes_on_node, parse_squeue_line
from collectors.slurm.pids import PidJobs
from collectors.slurm.samples import SlurmJob, SlurmTick

Runner = Callable[[Sequence[str]], str]

ON_NODE_STATES = "RUNNING,SUSPENDED,COMPLETING"


class SlurmCollector:
    """Reads `squeue` for this node every tick and `scontrol show job -d` once per new job.

    A job's GPUs do not change while it runs, so the detailed reading (the only one naming
    GPU indexes) is taken once per job and kept until the job leaves the node.
    """

    name = "slurm"
    role = "slurm"

    def __init__(self, pid_watch: PidWatch | None = None, interval_s: float = 1.0, *,
                 node: str | None = None, runner: Runner = run_slurm,
                 proc_root: str = "/proc") -> None:
        self.interval_s = interval_s
        self.pid_watch = pid_watch or PidWatch()
        self.node = node or node_name()
        self.runner = runner
        self.pids = PidJobs(proc_root, lambda: runner(["scontrol", "listpids"]))
        self._gpus: dict[str, tuple[int, ...] | None] = {}

    def open(self) -> None:
        """Unavailable without Slurm's commands or configuration, or when this is no node."""
        missing = slurm_missing()
        if missing is not None:
            raise CollectorUnavailable(missing, "slurm")
        try:
            self._squeue()
        except CollectorError as error:
            if "Invalid node name" in error.msg:
                raise CollectorUnavailable(
                    f"this machine is no Slurm node (no node named {self.node})", "slurm"
                ) from None
            raise CollectorUnavailable(f"Slurm does not answer: {error.msg}", "slurm") from None

    def sample(self) -> SlurmTick:
        """One reading: the jobs here, with GPUs, and the job of each watched pid."""
        taken_at = time.time()
        listed = self._squeue()
        for gone in self._gpus.keys() - {j.job_id for j in listed}:
            del self._gpus[gone]
        jobs = tuple(self._with_gpus(job) for job in listed)
        processes = self.pids.map(self.pid_watch.get(), jobs_running=bool(jobs))
        return SlurmTick(taken_at, self.node, jobs, processes)

    def close(self) -> None:
        """Nothing is held between ticks."""

    def _squeue(self) -> list[SlurmJob]:
        out = self.runner(["squeue", "-h", "-w", self.node, "-t", ON_NODE_STATES,
                           "-o", SQUEUE_FORMAT])
        return [job for line in out.splitlines() if (job := parse_squeue_line(line))]

    def _with_gpus(self, job: SlurmJob) -> SlurmJob:
        if job.job_id not in self._gpus:
            try:
                detail = self.runner(["scontrol", "show", "job", "-d", "-o", job.job_id])
                self._gpus[job.job_id] = gpu_indexes_on_node(detail, self.node)
            except CollectorError:
                return job  # ended between the two calls; asked again next tick if still here
        indexes = self._gpus[job.job_id]
        return job if indexes is None else replace(job, gpu_indexes=indexes)

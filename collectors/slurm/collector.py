"""The Slurm collector: the jobs on this node, their GPUs, and the job of every GPU process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from collectors.base import CollectorError, CollectorUnavailable
from collectors.machine.host import PidWatch
from collectors.slurm.commands import node_name, run_slurm, slurm_missing
from collectors.slurm.parse import SQUEUE_FORMAT, gpu_indexes_on_node, parse_squeue_line
from collectors.slurm.pids import PidJobs
from collectors.slurm.samples import SlurmJob, SlurmTick

Runner = Callable[[Sequence[str]], str]

ON_NODE_STATES = "RUNNING,SUSPENDED,COMPLETING"


JOBS_REFRESH_S = 5.0
"""Seconds between two `squeue` reads when nothing asks for one sooner. `squeue` is most of the
source's cost (3 to 4 ms of CPU with 50 jobs, against under 1 ms for the rest of a tick), and
the jobs on a node change far less often than GPU processes do: between reads, elapsed times
advance with the clock, and a GPU process of a job not listed yet triggers a read at once."""


class SlurmCollector:
    """Reads this node's jobs (`squeue`, `scontrol show job -d`) and maps GPU pids to them.

    `squeue` runs every `JOBS_REFRESH_S`, and at once when a process of a job not listed yet
    appears (once per such job: a job hidden by `PrivateData` stays unlisted); `scontrol show
    job -d` runs once per new job. GPU pids are mapped every tick.

    A job's GPUs do not change while it runs, so the detailed reading (the only one naming
    GPU indexes) is taken once per job and kept until the job leaves the node.
    """

    name = "slurm"
    role = "slurm"

    def __init__(
        self,
        pid_watch: PidWatch | None = None,
        interval_s: float = 1.0,
        *,
        node: str | None = None,
        runner: Runner = run_slurm,
        proc_root: str = "/proc",
        refresh_s: float = JOBS_REFRESH_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval_s = interval_s
        self.pid_watch = pid_watch or PidWatch()
        self.node = node or node_name()
        self.runner = runner
        self.refresh_s = refresh_s
        self.clock = clock
        self.pids = PidJobs(proc_root, lambda: runner(["scontrol", "listpids"]))
        self._gpus: dict[str, tuple[int, ...] | None] = {}
        self._listed: tuple[list[SlurmJob], float] | None = None
        self._asked: set[str] = set()
        """Jobs of mapped processes that made `squeue` run early (once each)."""

    def open(self) -> None:
        """Unavailable without Slurm's commands or configuration, or when this is no node."""
        missing = slurm_missing()
        if missing is not None:
            raise CollectorUnavailable(missing, "slurm")
        try:
            self._listed = (self._squeue(), self.clock())
        except CollectorError as error:
            if "Invalid node name" in error.msg:
                raise CollectorUnavailable(
                    f"this machine is no Slurm node (no node named {self.node})", "slurm"
                ) from None
            raise CollectorUnavailable(f"Slurm does not answer: {error.msg}", "slurm") from None

    def sample(self) -> SlurmTick:
        """One reading: the jobs here, with GPUs, and the job of each watched pid."""
        taken_at = self.clock()
        listed = self._jobs(taken_at, stale=False)
        processes = self.pids.map(self.pid_watch.get(), jobs_running=bool(listed))
        mapped = {p.job_id for p in processes}
        unknown = mapped - {job.job_id for job in listed} - self._asked
        self._asked &= mapped
        if unknown:
            self._asked |= unknown
            listed = self._jobs(taken_at, stale=True)  # a job started since the last read
        for gone in self._gpus.keys() - {j.job_id for j in listed}:
            del self._gpus[gone]
        self._read_details([job.job_id for job in listed if job.job_id not in self._gpus])
        jobs = tuple(self._with_gpus(job) for job in listed)
        return SlurmTick(taken_at, self.node, jobs, processes)

    def _jobs(self, now: float, stale: bool) -> list[SlurmJob]:
        """The jobs here: read again when `stale` or after `refresh_s`, else aged by the clock."""
        if self._listed is not None and not stale:
            jobs, read_at = self._listed
            if 0 <= now - read_at < self.refresh_s:
                return [_aged(job, now - read_at) for job in jobs]
        jobs = self._squeue()
        self._listed = (jobs, now)
        return jobs

    def close(self) -> None:
        """Nothing is held between ticks."""

    def _squeue(self) -> list[SlurmJob]:
        out = self.runner(
            ["squeue", "-h", "-w", self.node, "-t", ON_NODE_STATES, "-o", SQUEUE_FORMAT]
        )
        return [job for line in out.splitlines() if (job := parse_squeue_line(line))]

    def _read_details(self, new: list[str]) -> None:
        """Each new job's GPUs: one `scontrol` call for one new job, one for all when several.

        Without an id `scontrol show job` lists every job the controller holds, which costs
        more than one job's reading but far less than one call per job at start-up.
        """
        if not new:
            return
        try:
            text = self.runner(
                ["scontrol", "show", "job", "-d", "-o", *([new[0]] if len(new) == 1 else [])]
            )
        except CollectorError:
            return  # ended between the two calls; asked again next tick if still here
        wanted = set(new)
        for line in text.splitlines():
            job_id = line[len("JobId=") :].split(" ", 1)[0] if line.startswith("JobId=") else ""
            if job_id in wanted:
                self._gpus[job_id] = gpu_indexes_on_node(line, self.node)

    def _with_gpus(self, job: SlurmJob) -> SlurmJob:
        indexes = self._gpus.get(job.job_id)
        return job if indexes is None else replace(job, gpu_indexes=indexes)


def _aged(job: SlurmJob, seconds: float) -> SlurmJob:
    """The job as it stands `seconds` after it was read: a running job's time goes on."""
    if job.state != "RUNNING" or job.elapsed_s is None:
        return job
    return replace(job, elapsed_s=job.elapsed_s + int(seconds))

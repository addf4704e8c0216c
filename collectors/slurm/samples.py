"""The Slurm source's samples: the jobs on this node and the job behind each GPU process."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job running (or suspended, or completing) on this node, as Slurm reports it."""

    job_id: str
    """Slurm's job id (`4711`); an array task has its own id here, its array in `array_id`."""
    user: str
    name: str
    partition: str
    state: str
    """`RUNNING`, `SUSPENDED`, `COMPLETING`, ..."""
    elapsed_s: int | None
    time_limit_s: int | None
    """`None` when the job has no limit (`UNLIMITED`)."""
    gpu_indexes: tuple[int, ...] | None = None
    """GPUs Slurm allocated to the job on this node (`GRES ... IDX:`); `None` when unknown."""
    gpus_requested: int = 0
    """GPUs the job asked for per node (`gres:gpu:K`)."""
    array_id: str | None = None
    """`4700_3` for task 3 of array job 4700; `None` outside an array."""

    @property
    def time_left_s(self) -> int | None:
        """Seconds until the time limit; `None` without a limit or an elapsed time."""
        if self.time_limit_s is None or self.elapsed_s is None:
            return None
        return max(0, self.time_limit_s - self.elapsed_s)

    @property
    def shown_id(self) -> str:
        """The id a person knows the job by: the array form when it has one."""
        return self.array_id or self.job_id


@dataclass(frozen=True, slots=True)
class ProcessJob:
    """The Slurm job and step one process belongs to."""

    pid: int
    job_id: str
    step: str | None
    """`0`, `batch`, `extern`; `None` when only the job is known."""
    found_by: str
    """`cgroup`, `environ` or `listpids`: how the job was found."""

    @property
    def label(self) -> str:
        """`job 4711.0` (or `job 4711` without a step), as the process table names it."""
        return f"job {self.job_id}" + (f".{self.step}" if self.step is not None else "")


@dataclass(frozen=True, slots=True)
class SlurmTick:
    """One reading of Slurm on this node."""

    taken_at: float
    node: str
    jobs: tuple[SlurmJob, ...]
    processes: tuple[ProcessJob, ...] = ()
    """The job of every watched (GPU) process that belongs to one."""

    def job_of(self, pid: int) -> ProcessJob | None:
        """The job `pid` belongs to, if any."""
        return next((p for p in self.processes if p.pid == pid), None)

    def job(self, job_id: str) -> SlurmJob | None:
        """The job with id `job_id`, if it runs here."""
        return next((j for j in self.jobs if j.job_id == job_id), None)

    def job_of_gpu(self, index: int) -> SlurmJob | None:
        """The job Slurm gave GPU `index` to, if any."""
        return next((j for j in self.jobs if index in (j.gpu_indexes or ())), None)

"""The Slurm job of a process: from its cgroup path, its environment, or `scontrol listpids`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from collectors.base import GpuherdError
from collectors.slurm.parse import parse_listpids
from collectors.slurm.samples import ProcessJob

# cgroup v1: `4:memory:/slurm/uid_1000/job_4711/step_0/task_0` (also `slurm_<node>/` when one
# host runs several slurmd); cgroup v2: `0::/system.slice/slurmstepd.scope/job_4711/step_0/...`.
_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/step_([A-Za-z0-9_.+-]+))?")
_ENVIRON_MAX_BYTES = 1 << 20


def job_of_cgroup(text: str) -> tuple[str, str | None] | None:
    """(job id, step) from the text of `/proc/<pid>/cgroup`; `None` outside Slurm's cgroups."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if "slurm" not in path:
            continue
        m = _CGROUP_JOB.search(path)
        if m is not None:
            return m.group(1), m.group(2)
    return None


def job_of_environ(raw: bytes) -> tuple[str, str | None] | None:
    """(job id, step) from `/proc/<pid>/environ`: `SLURM_JOB_ID`, `SLURM_STEP_ID`.

    A batch script has no step id of its own: its processes are the `batch` step.
    """
    env: dict[bytes, bytes] = {}
    for item in raw.split(b"\0"):
        if item.startswith(b"SLURM_"):
            key, _, value = item.partition(b"=")
            env[key] = value
    job = env.get(b"SLURM_JOB_ID", b"")
    if not job.isdigit():
        return None
    step = env.get(b"SLURM_STEP_ID")
    if step is None:
        return job.decode(), "batch"
    return job.decode(), step.decode("ascii", "replace")


class PidJobs:
    """Finds the job of each watched pid once, and forgets a pid when it goes away.

    The cgroup path costs one small read; the environment is readable only by root or the
    process's owner; `scontrol listpids` asks the local slurmd and runs only when some new pid
    was found by neither, at most once a tick.
    """

    def __init__(self, proc_root: str = "/proc", listpids: Callable[[], str] | None = None) -> None:
        self.proc_root = proc_root
        self.listpids = listpids
        self._known: dict[int, ProcessJob | None] = {}

    def map(self, pids: Iterable[int], jobs_running: bool) -> tuple[ProcessJob, ...]:
        """The jobs of `pids` (a pid of no job is left out)."""
        wanted = set(pids)
        for gone in self._known.keys() - wanted:
            del self._known[gone]
        unresolved = [pid for pid in wanted if pid not in self._known]
        found = {pid: self._from_proc(pid) for pid in unresolved}
        missing = [pid for pid, job in found.items() if job is None]
        if missing and self.listpids is not None:
            if not jobs_running:
                # No job listed (yet): a pid found nowhere is asked about again next tick,
                # not taken for one of no job before slurmd could be asked.
                for pid in missing:
                    del found[pid]
            else:
                from_slurmd = self._ask_slurmd()
                for pid in missing:
                    if pid in from_slurmd:
                        found[pid] = ProcessJob(pid, *from_slurmd[pid], "listpids")
        self._known.update(found)
        return tuple(
            sorted((j for j in self._known.values() if j is not None), key=lambda j: j.pid)
        )

    def _ask_slurmd(self) -> dict[int, tuple[str, str | None]]:
        assert self.listpids is not None
        try:
            return parse_listpids(self.listpids())
        except (OSError, GpuherdError):  # slurmd gone or refusing: the pids stay jobless
            return {}

    def _from_proc(self, pid: int) -> ProcessJob | None:
        base = f"{self.proc_root}/{pid}"
        try:
            with open(f"{base}/cgroup", encoding="utf-8", errors="replace") as f:
                found = job_of_cgroup(f.read())
            if found is not None:
                return ProcessJob(pid, found[0], found[1], "cgroup")
            with open(f"{base}/environ", "rb") as raw:
                found = job_of_environ(raw.read(_ENVIRON_MAX_BYTES))
        except OSError:  # gone, or another user's environment
            return None
        return ProcessJob(pid, found[0], found[1], "environ") if found is not None else None

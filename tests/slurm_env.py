"""The machine's one-node Slurm for the tests marked `slurm`: is it up, and real jobs on it.

`.ci/slurm-up` starts it in CI. Required there (`CI=true`): a missing Slurm fails the tests;
elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from collectors.slurm.commands import node_name, slurm_missing

WAIT_S = 30.0


def slurm_problem() -> str | None:
    """Why the tests cannot use a Slurm here; `None` when this node answers and is usable."""
    missing = slurm_missing({k: v for k, v in os.environ.items() if k != "GPUHERD_SLURM"})
    if missing is not None:
        return missing + " (.ci/slurm-up starts a one-node Slurm)"
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-n", node_name(), "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 10 s"
    state = out.stdout.strip()
    if out.returncode != 0 or state not in {"idle", "mixed", "allocated"}:
        return f"this node is not usable in Slurm (sinfo: {state or out.stderr.strip()})"
    return None


def wait_for(
    predicate,
    what: str,
    timeout_s: float = WAIT_S,  # type: ignore[no-untyped-def]
    every_s: float = 0.1,
):
    """Poll `predicate` until it returns something true; fail naming `what` after the wait."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"waited {timeout_s:g} s for {what}")


@dataclass
class SlurmJobs:
    """Submits real jobs (`sbatch --wrap`) and cancels every one of them afterwards."""

    directory: Path
    ids: list[str] = field(default_factory=list)

    def submit(self, command: str, *options: str) -> str:
        """Submit `command`; its job id."""
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                f"--output={self.directory}/slurm-%j.out",
                f"--chdir={self.directory}",
                *options,
                "--wrap",
                command,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        job_id = out.stdout.strip().split(";")[0]
        self.ids.append(job_id)
        return job_id

    def state(self, job_id: str) -> str:
        """The job's state as squeue has it ('' once it has left the queue)."""
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return out.stdout.strip()

    def running(self, command: str, *options: str) -> tuple[str, int]:
        """Submit `command` and wait until it runs; (job id, pid of its `sleep` process)."""
        job_id = self.submit(command, *options)
        wait_for(lambda: self.state(job_id) == "RUNNING", f"job {job_id} to run")
        return job_id, wait_for(lambda: self.pid_of(job_id, "sleep"), f"job {job_id}'s sleep")

    @staticmethod
    def pid_of(job_id: str, comm: str) -> int | None:
        """A pid of job `job_id` whose command name is `comm` (from `scontrol listpids`)."""
        out = subprocess.run(
            ["scontrol", "listpids", job_id],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        for line in out.stdout.splitlines()[1:]:
            pid = line.split()[0]
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                    return int(pid)
            except OSError:
                continue
        return None

    def cancel_all(self) -> None:
        """Cancel every job submitted here (those already ended are ignored by scancel)."""
        if self.ids and shutil.which("scancel"):
            subprocess.run(["scancel", *self.ids], capture_output=True, check=False, timeout=30)


def in_ci() -> bool:
    """Whether a missing Slurm fails the tests instead of skipping them."""
    return os.environ.get("CI") == "true"

"""What Slurm says of the jobs `queue add --slurm` submitted: state, reason, node, exit code.

Asked in this order, each for the jobs the one before did not know: `squeue --states=all`
(pending and running jobs, and ended ones for `MinJobAge`, 300 s by default), `sacct` (every
ended job, where Slurm keeps accounting: without slurmdbd it answers "accounting storage is
disabled" and is skipped), and last the recorded session itself (its command's exit code).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuherd.queue.liveness import read_job_end
from gpuherd.queue.slurm_ledger import SlurmSubmission

SEP = "\x1f"
TIMEOUT_S = 20.0

QUEUE_STATE = {
    "PENDING": "waiting",
    "REQUEUED": "waiting",
    "REQUEUE_HOLD": "waiting",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "RESIZING": "running",
    "COMPLETED": "done",
    "CANCELLED": "cancelled",
}
"""Slurm's states in the queue's words; every other end (FAILED, TIMEOUT, OUT_OF_MEMORY,
NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE) is `failed`."""


@dataclass(frozen=True, slots=True)
class SlurmStatus:
    """Slurm's view of one job."""

    state: str
    """Slurm's own state word (`PENDING`, `RUNNING`, `COMPLETED`, ...)."""
    reason: str | None = None
    node: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    source: str = "squeue"
    """`squeue`, `sacct` or `session` (Slurm no longer lists the job; its recording says)."""

    @property
    def queue_state(self) -> str:
        """The state in the queue's words (`waiting`, `running`, `done`, `failed`, ...)."""
        return QUEUE_STATE.get(self.state.split()[0], "failed")


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return 1, "", str(error)
    return done.returncode, done.stdout, done.stderr


def _wait_status(raw: str) -> tuple[int | None, int | None]:
    """Exit code and signal from squeue's wait status (768 is exit 3) or sacct's `3:0`."""
    if ":" in raw:
        code, _, sig = raw.partition(":")
        return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)
    if not raw.isdigit():
        return None, None
    status = int(raw)
    return (status >> 8, None) if status & 0x7F == 0 else (None, status & 0x7F)


def from_squeue(ids: Sequence[str]) -> dict[str, SlurmStatus]:
    """What `squeue` still holds of `ids` (pending, running, recently ended)."""
    fields = ",".join(
        f"{name}:{SEP}" for name in ("JobID", "State", "Reason", "NodeList", "exit_code")
    )
    code, out, _ = _run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-O", fields])
    found: dict[str, SlurmStatus] = {}
    for line in out.splitlines() if code == 0 else ():
        parts = [p.strip() for p in line.split(SEP)]
        if len(parts) < 5 or parts[0] not in ids:
            continue
        job_id, state, reason, node, raw = parts[:5]
        ended = QUEUE_STATE.get(state) not in ("waiting", "running")
        exit_code, signal = _wait_status(raw) if ended else (None, None)
        found[job_id] = SlurmStatus(
            state, None if reason in ("None", "") else reason, node or None, exit_code, signal
        )
    return found


def from_sacct(ids: Sequence[str]) -> tuple[dict[str, SlurmStatus], str | None]:
    """What accounting holds of `ids`; and why it holds nothing (no accounting here)."""
    code, out, err = _run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,ExitCode,NodeList"]
    )
    if code != 0:
        return {}, (err.strip().splitlines() or ["sacct failed"])[-1]
    found: dict[str, SlurmStatus] = {}
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 4 and parts[0] in ids:
            exit_code, signal = _wait_status(parts[2])
            found[parts[0]] = SlurmStatus(
                parts[1], None, parts[3] or None, exit_code, signal, "sacct"
            )
    return found, None


def from_session(entry: SlurmSubmission) -> SlurmStatus | None:
    """The recorded command's end, when Slurm no longer says (no accounting, long ended)."""
    end = read_job_end(Path(entry.session_dir))
    if end is None or end.exit_code is None:
        return None
    return SlurmStatus(
        "COMPLETED" if end.exit_code == 0 else "FAILED", None, None, end.exit_code, None, "session"
    )


def statuses(entries: Sequence[SlurmSubmission]) -> tuple[dict[str, SlurmStatus], str | None]:
    """Slurm's view of every entry; and a note when accounting could not be asked."""
    ids = [e.slurm_job_id for e in entries]
    if not ids:
        return {}, None
    found = from_squeue(ids)
    missing = [i for i in ids if i not in found]
    note = None
    if missing:
        more, note = from_sacct(missing)
        found |= more
    for entry in entries:
        if entry.slurm_job_id not in found:
            seen = from_session(entry)
            if seen is not None:
                found[entry.slurm_job_id] = seen
    return found, note

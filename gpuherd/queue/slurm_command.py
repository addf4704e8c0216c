"""`gpuherd queue` for jobs handed to Slurm: `add --slurm`, their part of `ls`, `cancel --slurm`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from gpuherd.present.format import fmt_timestamp
from gpuherd.queue.read_peak import recorded_peak
from gpuherd.queue.slurm_ledger import SlurmLedger, SlurmSubmission
from gpuherd.queue.slurm_status import SlurmStatus, statuses
from gpuherd.queue.slurm_submit import add_slurm, slurm_reason
from gpuherd.queue.store import QueueError, QueueStore

__all__ = ["add_slurm", "cancel_slurm", "slurm_json", "slurm_table"]


def _entry_json(entry: SlurmSubmission, status: SlurmStatus | None) -> dict[str, Any]:
    session = Path(entry.session_dir)
    summary = session / "summary.md"
    return {
        "id": None,
        "name": entry.name,
        "state": status.queue_state if status else "unknown",
        "argv": list(entry.argv),
        "cwd": entry.cwd,
        "gpus": entry.gpus,
        "vram_bytes": entry.vram_bytes,
        "session_dir": str(session),
        "summary": str(summary) if summary.is_file() else None,
        "created_at": entry.submitted_at,
        "exit_code": status.exit_code if status else None,
        "peak_vram_bytes": recorded_peak(session),
        "slurm": {
            "job_id": entry.slurm_job_id,
            "state": status.state if status else None,
            "reason": status.reason if status else None,
            "node": status.node if status else None,
            "signal": status.signal if status else None,
            "source": status.source if status else None,
            "partition": entry.partition,
            "time_limit": entry.time_limit,
        },
    }


def slurm_json(store: QueueStore) -> tuple[list[dict[str, Any]], str | None]:
    """`queue ls --json`'s objects for the Slurm jobs, and a note on what Slurm could not say."""
    ledger = SlurmLedger(store.path.parent)
    entries = ledger.entries()
    found, note = statuses(entries)
    return [_entry_json(e, found.get(e.slurm_job_id)) for e in entries], note


def slurm_table(store: QueueStore) -> str:
    """The Slurm jobs as `queue ls` prints them under the queue's own ('' without any)."""
    rows, note = slurm_json(store)
    if not rows:
        return ""
    lines = [
        "",
        "Slurm jobs (queue add --slurm):",
        f"{'SLURM ID':>9}  {'NAME':<16} {'STATE':<11} {'NODE/REASON':<20} {'EXIT':>4}  "
        "SUBMITTED  SESSION",
    ]
    for row in rows:
        slurm = row["slurm"]
        where = slurm["node"] if row["state"] != "waiting" else f"({slurm['reason'] or '-'})"
        code = "-" if row["exit_code"] is None else str(row["exit_code"])
        lines.append(
            f"{slurm['job_id']:>9}  {row['name'][:16]:<16} "
            f"{(slurm['state'] or 'unknown')[:11]:<11} {(where or '-')[:20]:<20} "
            f"{code:>4}  {fmt_timestamp(row['created_at'])[11:19]}   "
            f"{row['session_dir']}"
        )
    if note and any(r["slurm"]["source"] != "sacct" for r in rows if r["state"] != "running"):
        lines.append(
            f"(sacct: {note}; ended jobs are read from squeue while Slurm keeps them, "
            "then from their recorded session)"
        )
    return "\n".join(lines)


def cancel_slurm(store: QueueStore, job_id: str) -> str:
    """`scancel` a job this queue handed to Slurm; Slurm's reason when it will not."""
    entry = SlurmLedger(store.path.parent).find(job_id)
    if entry is None:
        raise QueueError(
            f"no Slurm job {job_id} was submitted by this queue (`gpuherd queue ls` lists them)"
        )
    try:
        done = subprocess.run(
            ["scancel", job_id],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise QueueError(f"scancel {job_id}: {error}") from None
    if done.returncode != 0 or done.stderr.strip():
        raise QueueError(f"Slurm did not cancel job {job_id}: {slurm_reason(done.stderr)}")
    return f"asked Slurm to cancel job {job_id} ({entry.name})"

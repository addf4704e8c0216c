"""The Slurm part of a session's summary: the job it ran in, and the jobs seen on the node."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from collectors.session.session_format import META, SLURM_FILE

MAX_JOBS_LISTED = 50
MAX_BYTES = 16 << 20
"""Of `slurm.csv` read (a change log: a week on a busy node is a few MB)."""


def slurm_summary(directory: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    """`{"job": ..., "jobs_seen": [...]}`; `None` for a session without Slurm."""
    own = meta.get(META.slurm)
    seen = _jobs_seen(directory / SLURM_FILE)
    if not isinstance(own, dict) and not seen:
        return None
    return {"job": own if isinstance(own, dict) else None, "jobs_seen": seen}


def _jobs_seen(path: Path) -> list[dict[str, Any]]:
    """One entry per job in `slurm.csv`: first and last seen, last state, GPUs, its pids."""
    try:
        # Not through a link: a session may sit in a directory other users write to.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8", errors="replace", newline="") as f:
            rows = list(csv.DictReader(io.StringIO(f.read(MAX_BYTES))))
    except (OSError, csv.Error):
        return []
    jobs: dict[str, dict[str, Any]] = {}
    for row in rows:
        job_id, t = row.get("job_id") or "", _float(row.get("t"))
        if not job_id or t is None:
            continue  # a damaged row: the rest still count
        job = jobs.setdefault(job_id, {"job_id": job_id, "first_seen": t, "pids": []})
        job["last_seen"] = t
        if row.get("event") == "process" and (row.get("pid") or "").isdigit():
            job["pids"].append(int(row["pid"]))
            continue
        for key in ("array_id", "user", "name", "partition", "state"):
            if row.get(key):
                job[key] = row[key]
        job["gpus"] = [int(g) for g in (row.get("gpus") or "").split() if g.isdigit()]
    return sorted(jobs.values(), key=lambda j: j["first_seen"])[:MAX_JOBS_LISTED]


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def slurm_lines(data: dict[str, Any]) -> list[str]:
    """The `## Slurm` section of summary.md (nothing without Slurm)."""
    slurm = data.get("slurm")
    if not slurm:
        return []
    lines = ["## Slurm", ""]
    own = slurm["job"]
    if own:
        lines.append(
            f"- Recorded inside Slurm job {own.get('array_id') or own['job_id']}, "
            f"step {own.get('step')}, on node {own.get('node') or '-'}; GPUs "
            f"{own.get('gpus') or '-'}."
        )
    if slurm["jobs_seen"]:
        lines += [
            "",
            "| job | user | name | partition | GPUs | last state | GPU pids |",
            "|---|---|---|---|---|---|---|",
        ]
        for job in slurm["jobs_seen"]:
            lines.append(
                f"| {job.get('array_id') or job['job_id']} | {job.get('user', '-')} | "
                f"{job.get('name', '-')} | {job.get('partition', '-')} | "
                f"{','.join(map(str, job.get('gpus', []))) or '-'} | {job.get('state', '-')} | "
                f"{','.join(map(str, sorted(set(job['pids'])))) or '-'} |"
            )
    return lines + [""]

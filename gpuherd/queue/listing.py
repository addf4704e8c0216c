"""How `gpuherd queue ls` and `show` present jobs: a table, JSON objects, and one job in full."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gpuherd.present.format import fmt_duration, fmt_timestamp, format_size
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.store_rows import DamagedRow

NONE = "-"
COLUMNS = ("ID", "#", "NAME", "STATE", "GPU", "NEED", "PEAK", "EXIT", "TIME", "WHY")
"""`#` is the place in line of a waiting job; TIME is how long it ran (or runs)."""
MAX_NAME_CHARS = 24
MAX_WHY_CHARS = 70


def job_name(job: Job) -> str:
    """The job's `--name`, else its program's file name."""
    return job.spec.name or job.spec.argv[0].rsplit("/", 1)[-1]


def duration_s(job: Job, now: float) -> float | None:
    """How long the job ran: to its end, or to `now` while it runs; `None` before it ran."""
    if job.started_at is None or job.state in (JobState.WAITING, JobState.LAUNCHING):
        return None
    end = job.ended_at if job.ended_at is not None else now
    return max(0.0, end - job.started_at)


def places(jobs: Sequence[Job]) -> dict[int, int]:
    """Job id -> place in line (1 = next to start) of each waiting job."""
    waiting = sorted(
        (j for j in jobs if j.state is JobState.WAITING), key=lambda j: (j.position, j.id)
    )
    return {job.id: n for n, job in enumerate(waiting, start=1)}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _state(job: Job) -> str:
    if job.cancel_requested and job.state in (JobState.LAUNCHING, JobState.RUNNING):
        return f"{job.state.value} (cancelling)"
    return job.state.value


def _gpus(job: Job) -> str:
    return ",".join(map(str, job.gpu_indices)) or NONE


def _need(job: Job) -> str:
    need = format_size(job.spec.vram_bytes)
    return need if job.spec.gpus == 1 else f"{job.spec.gpus}x {need}"


def table_rows(jobs: Sequence[Job], now: float) -> list[tuple[str, ...]]:
    """One row of text cells per job, in `COLUMNS` order."""
    place = places(jobs)
    rows: list[tuple[str, ...]] = []
    for job in jobs:
        took = duration_s(job, now)
        rows.append(
            (
                str(job.id),
                str(place[job.id]) if job.id in place else NONE,
                _cut(job_name(job), MAX_NAME_CHARS),
                _state(job),
                _gpus(job),
                _need(job),
                format_size(job.peak_vram_bytes) if job.peak_vram_bytes is not None else NONE,
                str(job.exit_code) if job.exit_code is not None else NONE,
                fmt_duration(took) if took is not None else NONE,
                _cut(job.wait_reason, MAX_WHY_CHARS) if job.wait_reason else NONE,
            )
        )
    return rows


def damaged_rows(damaged: Sequence[DamagedRow]) -> list[tuple[str, ...]]:
    """One table row per damaged row: its id, `damaged`, and why in the WHY column."""
    return [
        (str(row.job_id), NONE, "?", DAMAGED, *(NONE,) * 5, _cut(row.problem, MAX_WHY_CHARS))
        for row in damaged
    ]


DAMAGED = "damaged"
"""The state `ls` shows for a stored row that is not a job this gpuherd could have written."""


def render_table(
    jobs: Sequence[Job], now: float, paused: bool, damaged: Sequence[DamagedRow] = ()
) -> str:
    """The `queue ls` table (and a first line when the queue is paused)."""
    lines = ["the queue is paused: no job starts until `gpuherd queue resume`"] if paused else []
    if not jobs and not damaged:
        return "\n".join([*lines, "the queue is empty"])
    rows = [COLUMNS, *table_rows(jobs, now), *damaged_rows(damaged)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def job_json(job: Job, now: float, place: int | None) -> dict[str, Any]:
    """One job as the object `queue ls --json` lists (docs/queue.md); no environment."""
    spec = job.spec
    return {
        "id": job.id,
        "name": job_name(job),
        "state": job.state.value,
        "place": place,
        "argv": list(spec.argv),
        "cwd": spec.cwd,
        "gpus": spec.gpus,
        "vram_bytes": spec.vram_bytes,
        "max_util_pct": spec.max_util_pct,
        "after": spec.after,
        "retry_oom": spec.retry_oom,
        "attempts": job.attempts,
        "gpu_uuids": list(job.gpu_uuids),
        "gpu_indices": list(job.gpu_indices),
        "session_dir": job.session_dir,
        "pid": job.pid,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "duration_s": duration_s(job, now),
        "exit_code": job.exit_code,
        "peak_vram_bytes": job.peak_vram_bytes,
        "cancel_requested": job.cancel_requested,
        "reason": job.wait_reason,
    }


def jobs_json(
    jobs: Sequence[Job], now: float, damaged: Sequence[DamagedRow] = ()
) -> list[dict[str, Any]]:
    """`queue ls --json`: every job, in the order `ls` shows them, then the damaged rows.

    A damaged row has every key, `null` but for `id`, `state` (`damaged`) and `reason`.
    """
    place = places(jobs)
    listed = [job_json(job, now, place.get(job.id)) for job in jobs]
    keys = list(listed[0]) if listed else list(_KEYS)
    for row in damaged:
        listed.append(
            dict.fromkeys(keys) | {"id": row.job_id, "state": DAMAGED, "reason": row.problem}
        )
    return listed


_KEYS = (
    "id",
    "name",
    "state",
    "place",
    "argv",
    "cwd",
    "gpus",
    "vram_bytes",
    "max_util_pct",
    "after",
    "retry_oom",
    "attempts",
    "gpu_uuids",
    "gpu_indices",
    "session_dir",
    "pid",
    "created_at",
    "started_at",
    "ended_at",
    "duration_s",
    "exit_code",
    "peak_vram_bytes",
    "cancel_requested",
    "reason",
)


def _time(value: float | None) -> str:
    return fmt_timestamp(value) if value is not None else NONE


SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
"""A variable whose name holds one of these (any case) has its value masked by `queue show`:
the output is pasted into chats and tickets; `--show-secrets` prints it."""
MASK = "****"


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret (`HF_TOKEN`)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def render_job(job: Job, now: float, place: int | None, show_secrets: bool = False) -> str:
    """`queue show JOB`: every field of one job, its environment last, secrets masked."""
    spec = job.spec
    took = duration_s(job, now)
    fields = [
        ("job", f"{job.id} ({job_name(job)})"),
        ("state", _state(job) + (f", place {place} in line" if place is not None else "")),
        ("reason", job.wait_reason or NONE),
        ("command", shlex.join(spec.argv)),
        ("cwd", spec.cwd),
        (
            "needs",
            f"{_need(job)} per GPU on {spec.gpus} GPU"
            f"{'' if spec.gpus == 1 else 's'}, under {spec.max_util_pct:g} % busy",
        ),
        ("after", f"job {spec.after}" if spec.after is not None else NONE),
        ("retry on OOM", "yes" if spec.retry_oom else "no"),
        ("attempts", str(job.attempts)),
        (
            "GPUs",
            ", ".join(f"{i} ({u})" for i, u in zip(job.gpu_indices, job.gpu_uuids, strict=False))
            or NONE,
        ),
        ("session", job.session_dir or NONE),
        ("supervisor pid", str(job.pid) if job.pid is not None else NONE),
        ("queued", _time(job.created_at)),
        ("started", _time(job.started_at if took is not None else None)),
        ("ended", _time(job.ended_at)),
        ("ran for", fmt_duration(took) if took is not None else NONE),
        ("exit code", str(job.exit_code) if job.exit_code is not None else NONE),
        (
            "peak VRAM",
            format_size(job.peak_vram_bytes) if job.peak_vram_bytes is not None else NONE,
        ),
        ("cancel asked", "yes" if job.cancel_requested else "no"),
    ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name + ':':<{width + 1}} {value}" for name, value in fields]
    masked = [key for key, _ in spec.env if not show_secrets and is_secret_name(key)]
    lines.append(
        f"environment ({len(spec.env)} variables"
        + (f"; {len(masked)} masked, --show-secrets prints them" if masked else "")
        + "):"
    )
    lines += [f"  {key}={MASK if key in masked else value}" for key, value in spec.env]
    return "\n".join(lines)

"""The queue database's schema and the mapping between its rows and `Job` objects."""

from __future__ import annotations

import json
from typing import Any

from gpuherd.queue.jobs import Job, JobSpec, JobState

SCHEMA_VERSION = 1
"""`PRAGMA user_version` of the database this gpuherd writes; a newer one is refused."""

SCHEMA = (
    """CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so --after cannot change meaning
        position INTEGER NOT NULL,
        state TEXT NOT NULL,
        created_at REAL NOT NULL,
        owner_uid INTEGER NOT NULL,
        argv TEXT NOT NULL,                    -- JSON list of strings
        cwd TEXT NOT NULL,
        env TEXT NOT NULL,                     -- JSON list of [key, value]
        name TEXT,
        gpus INTEGER NOT NULL,
        vram_bytes INTEGER NOT NULL,
        max_util_pct REAL NOT NULL,
        after_id INTEGER,
        retry_oom INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        gpu_uuids TEXT NOT NULL DEFAULT '[]',
        gpu_indices TEXT NOT NULL DEFAULT '[]',
        session_dir TEXT,
        pid INTEGER,
        pid_start_time REAL,
        started_at REAL,
        ended_at REAL,
        exit_code INTEGER,
        peak_vram_bytes INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        wait_reason TEXT
    )""",
    "CREATE INDEX jobs_by_state ON jobs (state, position)",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

_FIELDS = (
    "id", "position", "state", "created_at", "owner_uid", "argv", "cwd", "env", "name", "gpus",
    "vram_bytes", "max_util_pct", "after_id", "retry_oom", "attempts", "gpu_uuids",
    "gpu_indices", "session_dir", "pid", "pid_start_time", "started_at", "ended_at",
    "exit_code", "peak_vram_bytes", "cancel_requested", "wait_reason",
)
COLUMNS = ", ".join(_FIELDS)
"""The columns `job_from_row` expects, in order."""


def spec_values(spec: JobSpec) -> dict[str, Any]:
    """The columns of a job's spec, ready to insert."""
    return {
        "argv": json.dumps(list(spec.argv)), "cwd": spec.cwd,
        "env": json.dumps([list(pair) for pair in spec.env]), "name": spec.name,
        "gpus": spec.gpus, "vram_bytes": spec.vram_bytes, "max_util_pct": spec.max_util_pct,
        "after_id": spec.after, "retry_oom": int(spec.retry_oom),
    }


def job_from_row(row: tuple[Any, ...]) -> Job:
    """A `Job` from a row selected with `COLUMNS`."""
    r = dict(zip(_FIELDS, row, strict=True))
    spec = JobSpec(
        argv=tuple(json.loads(r["argv"])), cwd=r["cwd"],
        env=tuple((str(k), str(v)) for k, v in json.loads(r["env"])), name=r["name"],
        gpus=r["gpus"], vram_bytes=r["vram_bytes"], max_util_pct=r["max_util_pct"],
        after=r["after_id"], retry_oom=bool(r["retry_oom"]))
    return Job(
        id=r["id"], position=r["position"], spec=spec, state=JobState(r["state"]),
        created_at=r["created_at"], attempts=r["attempts"],
        gpu_uuids=tuple(json.loads(r["gpu_uuids"])),
        gpu_indices=tuple(int(i) for i in json.loads(r["gpu_indices"])),
        session_dir=r["session_dir"], pid=r["pid"], pid_start_time=r["pid_start_time"],
        started_at=r["started_at"], ended_at=r["ended_at"], exit_code=r["exit_code"],
        peak_vram_bytes=r["peak_vram_bytes"], cancel_requested=bool(r["cancel_requested"]),
        wait_reason=r["wait_reason"], owner_uid=r["owner_uid"])

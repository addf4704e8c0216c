"""The queue database's schema and the mapping between its rows and `Job` objects."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuherd.queue.jobs import Job, JobSpec, JobState
from gpuherd.queue.state_files import QueueError

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
    "id",
    "position",
    "state",
    "created_at",
    "owner_uid",
    "argv",
    "cwd",
    "env",
    "name",
    "gpus",
    "vram_bytes",
    "max_util_pct",
    "after_id",
    "retry_oom",
    "attempts",
    "gpu_uuids",
    "gpu_indices",
    "session_dir",
    "pid",
    "pid_start_time",
    "started_at",
    "ended_at",
    "exit_code",
    "peak_vram_bytes",
    "cancel_requested",
    "wait_reason",
)
COLUMNS = ", ".join(_FIELDS)
"""The columns `job_from_row` expects, in order."""


class NotAQueueError(Exception):
    """SQLite opened the file but it is not an intact queue database."""


def ensure_schema(db: sqlite3.Connection, path: Path) -> None:
    """Check an opened queue database, creating the schema in a new one.

    Raises:
        NotAQueueError: it fails quick_check, or its schema is not whole.
        QueueError: it was written by a newer gpuherd.
    """
    row = db.execute("PRAGMA quick_check").fetchone()
    if row is None or row[0] != "ok":
        raise NotAQueueError(str(row[0]) if row else "no answer to quick_check")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise QueueError(
                f"{path}: queue schema {version} is newer than this gpuherd reads "
                f"({SCHEMA_VERSION}); upgrade gpuherd"
            )
        if version == 0:
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise NotAQueueError("it holds tables but no queue schema version")
            for statement in SCHEMA:  # not executescript: it would commit first
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        missing = required_columns(db)
        if missing:
            raise NotAQueueError(missing)
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def required_columns(db: sqlite3.Connection) -> str | None:
    """What the schema lacks (a dropped table or column), or `None` when it is whole."""
    for table, needed in (("jobs", _FIELDS), ("settings", ("key", "value"))):
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not have:
            return f"its {table} table is missing"
        lost = [name for name in needed if name not in have]
        if lost:
            return f"its {table} table lacks the column(s) {', '.join(lost)}"
    return None


def spec_values(spec: JobSpec) -> dict[str, Any]:
    """The columns of a job's spec, ready to insert."""
    return {
        "argv": json.dumps(list(spec.argv)),
        "cwd": spec.cwd,
        "env": json.dumps([list(pair) for pair in spec.env]),
        "name": spec.name,
        "gpus": spec.gpus,
        "vram_bytes": spec.vram_bytes,
        "max_util_pct": spec.max_util_pct,
        "after_id": spec.after,
        "retry_oom": int(spec.retry_oom),
    }


class DamagedRowError(ValueError):
    """A stored row that is not a job this gpuherd could have written (edited by hand, say)."""

    def __init__(self, job_id: int, problem: str) -> None:
        super().__init__(f"job {job_id}: {problem}")
        self.job_id = job_id
        self.problem = problem


@dataclass(frozen=True, slots=True)
class DamagedRow:
    """A row of the jobs table that is skipped, and why; the rest of the queue goes on."""

    job_id: int
    """The row's id (an alias of SQLite's rowid, so always a whole number)."""
    state: object
    """The row's state as stored."""
    problem: str


def _json_list(r: dict[str, Any], key: str, item: type) -> list[Any]:
    try:
        value = json.loads(r[key]) if isinstance(r[key], str) else None
    except json.JSONDecodeError:
        value = None
    except (RecursionError, ValueError):
        # Nesting thousands deep exhausts the parser's stack; an integer past Python's digit
        # limit is a ValueError: a row edited so is damaged, like any other.
        raise DamagedRowError(
            r["id"], f"{key} is JSON nested too deeply or with a number too long to read"
        ) from None
    if not isinstance(value, list):
        raise DamagedRowError(r["id"], f"{key} is not a JSON list")
    if item is list:
        ok = all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
            for v in value
        )
    else:
        ok = all(isinstance(v, item) and not isinstance(v, bool) for v in value)
    if not ok:
        raise DamagedRowError(r["id"], f"{key} holds a value of the wrong kind")
    return value


_INTS = (
    "id",
    "position",
    "owner_uid",
    "gpus",
    "vram_bytes",
    "retry_oom",
    "attempts",
    "cancel_requested",
)
_OPTIONAL_INTS = ("after_id", "pid", "exit_code", "peak_vram_bytes")
_NUMBERS = ("created_at", "max_util_pct")
_OPTIONAL_NUMBERS = ("pid_start_time", "started_at", "ended_at")
_OPTIONAL_TEXTS = ("name", "session_dir", "wait_reason")


def _check_kinds(r: dict[str, Any]) -> None:
    for key in (*_INTS, *_OPTIONAL_INTS):
        value = r[key]
        if not isinstance(value, int) and not (value is None and key in _OPTIONAL_INTS):
            raise DamagedRowError(r["id"], f"{key} is {value!r}, not a whole number")
    for key in (*_NUMBERS, *_OPTIONAL_NUMBERS):
        value = r[key]
        if not isinstance(value, int | float) and not (value is None and key in _OPTIONAL_NUMBERS):
            raise DamagedRowError(r["id"], f"{key} is {value!r}, not a number")
    for key in ("cwd", *_OPTIONAL_TEXTS):
        if not isinstance(r[key], str) and not (r[key] is None and key != "cwd"):
            raise DamagedRowError(r["id"], f"{key} is {r[key]!r}, not text")
    if r["gpus"] < 1 or r["vram_bytes"] < 0:
        raise DamagedRowError(r["id"], "gpus below 1 or a negative vram_bytes")
    if r["state"] not in {state.value for state in JobState}:
        raise DamagedRowError(r["id"], f"unknown state {r['state']!r}")


def job_from_row(row: tuple[Any, ...]) -> Job:
    """A `Job` from a row selected with `COLUMNS`.

    Raises:
        DamagedRowError: a value is not of the kind this gpuherd writes (checked one by one, so
            the message says which).
    """
    r = dict(zip(_FIELDS, row, strict=True))
    _check_kinds(r)
    argv = _json_list(r, "argv", str)
    if not argv:
        raise DamagedRowError(r["id"], "argv is an empty command")
    spec = JobSpec(
        argv=tuple(argv),
        cwd=r["cwd"],
        env=tuple((k, v) for k, v in _json_list(r, "env", list)),
        name=r["name"],
        gpus=r["gpus"],
        vram_bytes=r["vram_bytes"],
        max_util_pct=float(r["max_util_pct"]),
        after=r["after_id"],
        retry_oom=bool(r["retry_oom"]),
    )
    return Job(
        id=r["id"],
        position=r["position"],
        spec=spec,
        state=JobState(r["state"]),
        created_at=r["created_at"],
        attempts=r["attempts"],
        gpu_uuids=tuple(_json_list(r, "gpu_uuids", str)),
        gpu_indices=tuple(_json_list(r, "gpu_indices", int)),
        session_dir=r["session_dir"],
        pid=r["pid"],
        pid_start_time=r["pid_start_time"],
        started_at=r["started_at"],
        ended_at=r["ended_at"],
        exit_code=r["exit_code"],
        peak_vram_bytes=r["peak_vram_bytes"],
        cancel_requested=bool(r["cancel_requested"]),
        wait_reason=r["wait_reason"],
        owner_uid=r["owner_uid"],
    )


def read_rows(rows: list[tuple[Any, ...]]) -> tuple[list[Job], list[DamagedRow]]:
    """The jobs of `rows`, and the rows that are not jobs, each with why."""
    jobs: list[Job] = []
    damaged: list[DamagedRow] = []
    for row in rows:
        try:
            jobs.append(job_from_row(row))
        except DamagedRowError as error:
            damaged.append(DamagedRow(error.job_id, row[_FIELDS.index("state")], error.problem))
    return jobs, sorted(damaged, key=lambda row: row.job_id)


# The reads that the store and the dashboard's read-only watch both make, written once.
_ALL_JOBS = (
    f"SELECT {COLUMNS} FROM jobs ORDER BY state != 'waiting', "
    "CASE WHEN state = 'waiting' THEN position END, id"
)
_PAUSED = "SELECT value FROM settings WHERE key = 'paused'"


def select_jobs(db: sqlite3.Connection) -> tuple[list[Job], list[DamagedRow]]:
    """Every job (waiting ones in queue order, then the rest by id) and the damaged rows."""
    return read_rows(db.execute(_ALL_JOBS).fetchall())


def select_paused(db: sqlite3.Connection) -> bool:
    """Whether the queue is paused (no new job starts; running ones go on)."""
    row = db.execute(_PAUSED).fetchone()
    return row is not None and row[0] == "1"


def open_read_only(path: Path, timeout_s: float) -> sqlite3.Connection:
    """A connection that can only read the queue database at `path` (which must exist)."""
    # mode=rw: SQLite fails instead of creating a missing file; query_only refuses every
    # write this connection could make by mistake.
    db = sqlite3.connect(
        f"{path.as_uri()}?mode=rw", uri=True, timeout=timeout_s, check_same_thread=False
    )
    db.execute("PRAGMA query_only = 1")
    return db


def data_version(db: sqlite3.Connection) -> int:
    """A number that changes whenever another connection commits to the database."""
    return int(db.execute("PRAGMA data_version").fetchone()[0])

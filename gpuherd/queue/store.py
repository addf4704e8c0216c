"""The per-user queue database: jobs and their states in SQLite (WAL, mode 0600)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from collectors.base import GpuherdError
from gpuherd.queue.jobs import ENDED, Job, JobSpec, JobState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, position INTEGER NOT NULL, spec TEXT NOT NULL,
    state TEXT NOT NULL, created_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    gpu_uuids TEXT NOT NULL DEFAULT '[]', gpu_indices TEXT NOT NULL DEFAULT '[]',
    session_dir TEXT, pid INTEGER, pid_start_time REAL, started_at REAL, ended_at REAL,
    exit_code INTEGER, peak_vram_bytes INTEGER, cancel_requested INTEGER NOT NULL DEFAULT 0,
    wait_reason TEXT, owner_uid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class QueueError(GpuherdError):
    """A queue operation cannot be done; one line for the person, exit 2."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="queue")


def default_state_dir() -> Path:
    """`$GPUHERD_STATE_DIR`, else `$XDG_STATE_HOME/gpuherd`, else `~/.local/state/gpuherd`."""
    if os.environ.get("GPUHERD_STATE_DIR"):
        return Path(os.environ["GPUHERD_STATE_DIR"])
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "gpuherd"
    return Path.home() / ".local" / "state" / "gpuherd"


def _spec_from(text: str) -> JobSpec:
    raw = json.loads(text)
    raw["argv"] = tuple(raw["argv"])
    raw["env"] = tuple(tuple(pair) for pair in raw["env"])
    return JobSpec(**raw)


def _job(row: sqlite3.Row) -> Job:
    return Job(id=row["id"], position=row["position"], spec=_spec_from(row["spec"]),
               state=JobState(row["state"]), created_at=row["created_at"],
               attempts=row["attempts"], gpu_uuids=tuple(json.loads(row["gpu_uuids"])),
               gpu_indices=tuple(json.loads(row["gpu_indices"])),
               session_dir=row["session_dir"], pid=row["pid"],
               pid_start_time=row["pid_start_time"], started_at=row["started_at"],
               ended_at=row["ended_at"], exit_code=row["exit_code"],
               peak_vram_bytes=row["peak_vram_bytes"],
               cancel_requested=bool(row["cancel_requested"]), wait_reason=row["wait_reason"],
               owner_uid=row["owner_uid"])


class QueueStore:
    """One user's queue; every transition is a compare-and-set in one transaction."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    def open(cls, state_dir: Path) -> QueueStore:
        """Open (or create) `<state_dir>/queue.db`; a corrupt one is kept aside, never reset."""
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = state_dir / "queue.db"
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        try:
            db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as error:
            backup = path.with_name(f"queue.db.corrupt-{int(time.time())}")
            os.replace(path, backup)
            raise QueueError(f"{path} is not a queue database ({error}); kept as {backup}") \
                from None
        return cls(db, path)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(sql, args).fetchone()
        return row

    def add(self, spec: JobSpec) -> Job:
        """Append a waiting job."""
        data = asdict(spec)
        with self._db:
            top = self._one("SELECT COALESCE(MAX(position), 0) AS p FROM jobs")
            cur = self._db.execute(
                "INSERT INTO jobs (position, spec, state, created_at, owner_uid) "
                "VALUES (?, ?, ?, ?, ?)", ((top["p"] if top else 0) + 1, json.dumps(data),
                                           JobState.WAITING.value, time.time(), os.getuid()))
        return self.get(int(cur.lastrowid or 0))

    def jobs(self, states: Collection[JobState] | None = None) -> list[Job]:
        """Waiting jobs in position order, then the rest by id."""
        rows = self._db.execute("SELECT * FROM jobs ORDER BY state != 'waiting', "
                                "CASE WHEN state = 'waiting' THEN position ELSE id END").fetchall()
        found = [_job(r) for r in rows]
        return found if states is None else [j for j in found if j.state in states]

    def get(self, job_id: int) -> Job:
        """The job, or QueueError."""
        row = self._one("SELECT * FROM jobs WHERE id = ?", job_id)
        if row is None:
            raise QueueError(f"no job {job_id}")
        return _job(row)

    def remove(self, job_id: int) -> Job:
        """Delete a job that is not launching or running."""
        job = self.get(job_id)
        if job.state in (JobState.LAUNCHING, JobState.RUNNING):
            raise QueueError(f"job {job_id} is {job.state.value}: cancel it first")
        self._db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        return job

    def move(self, job_id: int, to_position: int) -> Job:
        """Put a waiting job at `to_position` (1 = first in line)."""
        waiting = [j.id for j in self.jobs([JobState.WAITING])]
        if job_id not in waiting:
            raise QueueError(f"job {job_id} is not waiting")
        waiting.remove(job_id)
        waiting.insert(max(0, to_position - 1), job_id)
        with self._db:
            for position, jid in enumerate(waiting, 1):
                self._db.execute("UPDATE jobs SET position = ? WHERE id = ?", (position, jid))
        return self.get(job_id)

    def paused(self) -> bool:
        """Whether launches are paused."""
        row = self._one("SELECT value FROM settings WHERE key = 'paused'")
        return row is not None and row["value"] == "1"

    def set_paused(self, paused: bool) -> None:
        """Pause or resume launches."""
        self._db.execute("INSERT OR REPLACE INTO settings VALUES ('paused', ?)",
                         ("1" if paused else "0",))

    def request_cancel(self, job_id: int) -> Job:
        """Cancel a waiting job; flag a launching or running one."""
        job = self.get(job_id)
        if job.state in ENDED:
            raise QueueError(f"job {job_id} already ended ({job.state.value})")
        if job.state is JobState.WAITING:
            self._cas(job_id, (JobState.WAITING,), state=JobState.CANCELLED.value,
                      ended_at=time.time())
        else:
            self._db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        return self.get(job_id)

    def _cas(self, job_id: int, expected: Sequence[JobState], **values: Any) -> bool:
        names = ", ".join(f"{k} = ?" for k in values)
        marks = ", ".join("?" for _ in expected)
        cur = self._db.execute(f"UPDATE jobs SET {names} WHERE id = ? AND state IN ({marks})",
                               (*values.values(), job_id, *(s.value for s in expected)))
        return cur.rowcount == 1

    def mark_launching(self, job_id: int, gpu_uuids: Sequence[str], gpu_indices: Sequence[int],
                       session_dir: str) -> bool:
        """Waiting -> launching; attempts += 1."""
        cur = self._db.execute(
            "UPDATE jobs SET state = ?, gpu_uuids = ?, gpu_indices = ?, session_dir = ?, "
            "attempts = attempts + 1, wait_reason = NULL, pid = NULL, pid_start_time = NULL, "
            "started_at = NULL, ended_at = NULL, exit_code = NULL "
            "WHERE id = ? AND state = 'waiting'",
            (JobState.LAUNCHING.value, json.dumps(list(gpu_uuids)),
             json.dumps(list(gpu_indices)), session_dir, job_id))
        return cur.rowcount == 1

    def mark_running(self, job_id: int, pid: int, pid_start_time: float,
                     started_at: float) -> bool:
        """Launching -> running."""
        return self._cas(job_id, (JobState.LAUNCHING,), state=JobState.RUNNING.value, pid=pid,
                         pid_start_time=pid_start_time, started_at=started_at)

    def mark_ended(self, job_id: int, state: JobState, exit_code: int | None, ended_at: float,
                   peak_vram_bytes: int | None) -> bool:
        """Launching/running -> an ended state."""
        return self._cas(job_id, (JobState.LAUNCHING, JobState.RUNNING), state=state.value,
                         exit_code=exit_code, ended_at=ended_at, peak_vram_bytes=peak_vram_bytes)

    def requeue(self, job_id: int, vram_bytes: int) -> Job:
        """An ended job back to waiting, same id and position, with a new need."""
        job = self.get(job_id)
        spec = replace(job.spec, vram_bytes=vram_bytes)
        if not self._cas(job_id, tuple(ENDED), state=JobState.WAITING.value,
                         spec=json.dumps(asdict(spec))):
            raise QueueError(f"job {job_id} has not ended")
        return self.get(job_id)

    def set_wait_reason(self, job_id: int, reason: str | None) -> None:
        """Why the job waits, in words."""
        self._db.execute("UPDATE jobs SET wait_reason = ? WHERE id = ?", (reason, job_id))

    def last_peak_for(self, argv: Sequence[str], cwd: str) -> int | None:
        """Peak of the last done/failed job with the same argv and cwd."""
        for job in sorted(self.jobs([JobState.DONE, JobState.FAILED]), key=lambda j: -j.id):
            if job.spec.argv == tuple(argv) and job.spec.cwd == cwd and job.peak_vram_bytes:
                return job.peak_vram_bytes
        return None

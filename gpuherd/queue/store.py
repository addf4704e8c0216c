"""The per-user queue: jobs in SQLite (WAL), changed only by compare-and-set transactions.

The runner and the command line write the same database from different processes, so every
change is one `BEGIN IMMEDIATE` transaction that checks the state it expects: a job launched by
one process can never be launched again, cancelled as if waiting, or moved by another.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gpuherd.queue.jobs import ENDED, Job, JobSpec, JobState
from gpuherd.queue.state_files import (
    QueueError,
    backup_corrupt,
    create_db_file,
    db_error,
    default_state_dir,
    prepare_state_dir,
)
from gpuherd.queue.store_rows import (
    COLUMNS,
    DamagedRow,
    DamagedRowError,
    NotAQueueError,
    ensure_schema,
    job_from_row,
    select_jobs,
    select_paused,
    spec_values,
)

__all__ = ["QueueError", "QueueStore", "default_state_dir"]

BUSY_TIMEOUT_S = 10.0
"""How long a write waits for the other process's transaction before giving up."""


class QueueStore:
    """The queue of one person: open with `QueueStore.open(state_dir)`, `close()` at the end.

    Safe to share between threads (one lock around the connection) and between processes
    (SQLite's locks; writes are `BEGIN IMMEDIATE`).
    """

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = threading.RLock()
        self.damaged: tuple[DamagedRow, ...] = ()
        """The rows the last `jobs()` skipped because they are not jobs, each with why."""

    @classmethod
    def open(cls, state_dir: Path) -> QueueStore:
        """Open (or create) `<state_dir>/queue.db`.

        Raises:
            QueueError: bad permissions, a newer schema, or a corrupt database; a corrupt one
                is renamed to `queue.db.corrupt-<time>` first and the message names it.
        """
        path = prepare_state_dir(state_dir)
        create_db_file(path)
        try:
            db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise db_error(path, "open the queue database", error) from None
        store = cls(db, path)
        try:
            ensure_schema(db, path)
        except QueueError:
            db.close()
            raise
        except sqlite3.OperationalError as error:
            db.close()
            raise db_error(path, "use the queue database", error) from None
        except (sqlite3.DatabaseError, NotAQueueError) as error:
            db.close()
            backup = backup_corrupt(path)
            raise QueueError(
                f"{path}: not a valid queue database ({error}); it was moved to "
                f"{backup} and nothing was reset: the next command starts an "
                "empty queue"
            ) from None
        return store

    def close(self) -> None:
        """Close the connection (the database stays as it is)."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (`BEGIN IMMEDIATE`), committed or rolled back.

        Raises:
            QueueError: SQLite failed (a full disk is named as one).
        """
        with self._lock, self._sqlite("change the queue"):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _sqlite(self, doing: str) -> Iterator[None]:
        """Turn SQLite's errors into one line (QueueError) saying what could not be done."""
        try:
            yield
        except sqlite3.Error as error:
            raise db_error(self.path, doing, error) from None

    def _row(self, db: sqlite3.Connection, job_id: int) -> Job:
        row = db.execute(f"SELECT {COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise QueueError(f"no job {job_id} in the queue")
        try:
            return job_from_row(row)
        except DamagedRowError as error:
            raise QueueError(
                f"job {job_id} is damaged in the queue database ({error.problem});"
                f" `gpuherd queue rm {job_id}` removes it"
            ) from None

    # Reading.
    def jobs(self, states: Collection[JobState] | None = None) -> list[Job]:
        """Jobs in `states` (default all): waiting ones in queue order, then the rest by id."""
        with self._lock, self._sqlite("read the queue"):
            found, damaged = select_jobs(self._db)
        self.damaged = tuple(damaged)
        return found if states is None else [job for job in found if job.state in states]

    def get(self, job_id: int) -> Job:
        """One job; `QueueError` when there is none with that id."""
        with self._lock, self._sqlite("read the queue"):
            return self._row(self._db, job_id)

    def paused(self) -> bool:
        """Whether the queue is paused (no new job starts; running ones go on)."""
        with self._lock, self._sqlite("read the queue"):
            return select_paused(self._db)

    def last_peak_for(self, argv: Sequence[str], cwd: str) -> int | None:
        """The recorded peak of the newest done or failed job with this argv and cwd."""
        with self._lock, self._sqlite("read the queue"):
            row = self._db.execute(
                "SELECT peak_vram_bytes FROM jobs WHERE argv = ? AND cwd = ? AND state IN "
                "('done', 'failed') AND typeof(peak_vram_bytes) = 'integer' "
                "ORDER BY ended_at DESC, id DESC LIMIT 1",
                (json.dumps(list(argv)), cwd),
            ).fetchone()
        return None if row is None else int(row[0])

    # Changes the command line makes.
    def add(self, spec: JobSpec) -> Job:
        """Put a job at the end of the line; the stored job."""
        values = spec_values(spec)
        with self._tx() as db:
            position = db.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM jobs").fetchone()[0]
            names = ", ".join(values)
            cursor = db.execute(
                f"INSERT INTO jobs (position, state, created_at, owner_uid, {names}) VALUES "
                f"(?, 'waiting', ?, ?, {', '.join('?' * len(values))})",
                (position, time.time(), os.getuid(), *values.values()),
            )
            assert cursor.lastrowid is not None
            return self._row(db, cursor.lastrowid)

    def remove(self, job_id: int) -> Job | DamagedRow:
        """Delete a job that is not launching or running; the job as it was.

        A damaged row (see `damaged`) is removed too, unless it says it is launching or
        running: what it was is returned then, as far as it can be read.
        """
        with self._tx() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            try:
                job = self._row(db, job_id)
            except QueueError:
                if row is None or row[0] in ("launching", "running"):
                    raise
                db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
                return DamagedRow(job_id, row[0], "damaged")
            if job.state in (JobState.LAUNCHING, JobState.RUNNING):
                raise QueueError(
                    f"job {job_id} is {job.state.value}: cancel it first "
                    f"(gpuherd queue cancel {job_id})"
                )
            waiting = db.execute(
                "SELECT id FROM jobs WHERE after_id = ? AND state = 'waiting' ORDER BY id",
                (job_id,),
            ).fetchall()
            if waiting:
                ids = ", ".join(str(row[0]) for row in waiting)
                raise QueueError(
                    f"job {job_id} cannot be removed: job {ids} waits for it "
                    f"(--after {job_id}); remove or cancel that first"
                )
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            return job

    def move(self, job_id: int, to_position: int) -> Job:
        """Put a waiting job at `to_position` in line (1 = first; past the end = last)."""
        if to_position < 1:
            raise QueueError(f"position {to_position} does not exist: 1 is the first in line")
        with self._tx() as db:
            job = self._row(db, job_id)
            if job.state is not JobState.WAITING:
                raise QueueError(f"job {job_id} is {job.state.value}: only a waiting job can move")
            order = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM jobs WHERE state = 'waiting' ORDER BY position, id"
                )
            ]
            order.remove(job_id)
            order.insert(min(to_position, len(order) + 1) - 1, job_id)
            db.executemany(
                "UPDATE jobs SET position = ? WHERE id = ?",
                [(n, other) for n, other in enumerate(order, start=1)],
            )
            return self._row(db, job_id)

    def set_paused(self, paused: bool) -> None:
        """Pause or resume the queue."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO settings (key, value) VALUES ('paused', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                ("1" if paused else "0",),
            )

    def request_cancel(self, job_id: int) -> Job:
        """Cancel a waiting job at once; mark a launching or running one for stopping.

        Raises:
            QueueError: the job has already ended (`job 3 already ended (done)`).
        """
        with self._tx() as db:
            job = self._row(db, job_id)
            if job.state in ENDED:
                raise QueueError(f"job {job_id} already ended ({job.state.value})")
            if job.state is JobState.WAITING:
                db.execute(
                    "UPDATE jobs SET state = 'cancelled', ended_at = ?, "
                    "cancel_requested = 1, wait_reason = NULL WHERE id = ?",
                    (time.time(), job_id),
                )
            else:
                db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
            return self._row(db, job_id)

    # Transitions the runner makes: False when the job was not in the expected state.
    def _cas(
        self,
        job_id: int,
        expected: Collection[JobState],
        assignments: str,
        values: Sequence[object],
    ) -> bool:
        marks = ", ".join("?" * len(expected))
        with self._tx() as db:
            cursor = db.execute(
                f"UPDATE jobs SET {assignments} WHERE id = ? AND state IN ({marks})",
                (*values, job_id, *(state.value for state in expected)),
            )
            return cursor.rowcount == 1

    def mark_launching(
        self, job_id: int, gpu_uuids: Sequence[str], gpu_indices: Sequence[int], session_dir: str
    ) -> bool:
        """Waiting -> launching, `attempts` + 1, its GPUs and session directory set."""
        return self._cas(
            job_id,
            (JobState.WAITING,),
            "state = 'launching', attempts = attempts + 1, gpu_uuids = ?, gpu_indices = ?, "
            "session_dir = ?, started_at = ?, wait_reason = NULL",
            (
                json.dumps(list(gpu_uuids)),
                json.dumps([int(i) for i in gpu_indices]),
                session_dir,
                time.time(),
            ),
        )

    def mark_running(self, job_id: int, pid: int, pid_start_time: float, started_at: float) -> bool:
        """Launching -> running, with its supervisor's pid and start time."""
        return self._cas(
            job_id,
            (JobState.LAUNCHING,),
            "state = 'running', pid = ?, pid_start_time = ?, started_at = ?",
            (pid, pid_start_time, started_at),
        )

    def unlaunch(self, job_id: int, reason: str) -> bool:
        """Launching without a supervisor -> waiting again, in its place, `attempts` - 1.

        Only for a launch that was cut off before its command could start (the launch gate
        holds the command until the job is marked running with its pid), so putting it back in
        line can never run it twice. `reason` is shown until the next decision replaces it.
        """
        with self._tx() as db:
            cursor = db.execute(
                "UPDATE jobs SET state = 'waiting', attempts = MAX(attempts - 1, 0), "
                "gpu_uuids = '[]', gpu_indices = '[]', session_dir = NULL, started_at = NULL, "
                "wait_reason = ? WHERE id = ? AND state = 'launching' AND pid IS NULL",
                (reason, job_id),
            )
            return cursor.rowcount == 1

    def mark_ended(
        self,
        job_id: int,
        state: JobState,
        exit_code: int | None,
        ended_at: float,
        peak_vram_bytes: int | None,
        reason: str | None = None,
    ) -> bool:
        """Launching or running -> `state` (done, failed or cancelled).

        `reason` says why, where the exit code does not (kept as the job's `wait_reason`).
        """
        if state not in ENDED:
            raise ValueError(f"{state.value} is not an end state")
        return self._cas(
            job_id,
            (JobState.LAUNCHING, JobState.RUNNING),
            "state = ?, exit_code = ?, ended_at = ?, peak_vram_bytes = ?, wait_reason = ?",
            (state.value, exit_code, ended_at, peak_vram_bytes, reason),
        )

    def requeue(self, job_id: int, vram_bytes: int) -> Job:
        """A failed job (CUDA OOM) waits again with a new need: same id, same position.

        Its attempts count stays, so the next launch is attempt 2; the first attempt's session
        directory stays on disk.
        """
        with self._tx() as db:
            job = self._row(db, job_id)
            if job.state is not JobState.FAILED:
                raise QueueError(
                    f"job {job_id} is {job.state.value}: only a failed job can be requeued"
                )
            db.execute(
                "UPDATE jobs SET state = 'waiting', vram_bytes = ?, gpu_uuids = '[]', "
                "gpu_indices = '[]', session_dir = NULL, pid = NULL, pid_start_time = NULL, "
                "started_at = NULL, ended_at = NULL, exit_code = NULL, peak_vram_bytes = NULL, "
                "cancel_requested = 0, wait_reason = NULL WHERE id = ?",
                (vram_bytes, job_id),
            )
            return self._row(db, job_id)

    def set_wait_reason(self, job_id: int, reason: str | None) -> None:
        """Why a job waits, or why it ended when its exit code does not say (`None` clears it).

        A job that no longer exists is left alone (it was removed meanwhile).
        """
        with self._tx() as db:
            db.execute("UPDATE jobs SET wait_reason = ? WHERE id = ?", (reason, job_id))

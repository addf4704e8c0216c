"""The dashboard's look at this user's queue: a collector of `QueueSnapshot`s, read-only.

It never creates the state directory or the database: until `gpuherd queue add` (or a runner)
makes one, every look says the queue does not exist. It opens the database without SQLite's
create flag and only ever reads, so a dashboard can never change, reset or move a queue.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.base import CollectorError
from collectors.machine.process_alive import process_alive
from collectors.roles import QUEUE
from collectors.samples import QueueJobRow, QueueSnapshot
from gpuherd.queue.headless import RUNNER_LOCK
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.listing import DAMAGED, job_name, places
from gpuherd.queue.state_files import DB_FILE, default_state_dir
from gpuherd.queue.store_rows import data_version, open_read_only, select_jobs, select_paused

if TYPE_CHECKING:
    from gpuherd.queue.liveness import JobEnd

READ_TIMEOUT_S = 0.5
"""How long a look waits for a writer's lock (WAL readers rarely wait at all)."""


def job_row(job: Job, place: int | None) -> QueueJobRow:
    """The dashboard's plain view of one stored job."""
    return QueueJobRow(
        id=job.id,
        name=job_name(job),
        state=job.state.value,
        gpus=job.spec.gpus,
        need_bytes=job.spec.vram_bytes,
        gpu_indices=job.gpu_indices,
        peak_vram_bytes=job.peak_vram_bytes,
        exit_code=job.exit_code,
        started_at=(
            job.started_at if job.state not in (JobState.WAITING, JobState.LAUNCHING) else None
        ),
        ended_at=job.ended_at,
        reason=job.wait_reason,
        cancel_requested=job.cancel_requested,
        place=place,
    )


def runner_pid(state_dir: Path, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid of the runner that holds `runner.lock` now, without touching the lock.

    The file keeps the pid of the last runner after it stops, and that pid may be reused, so
    the kernel's table of held locks decides whether a runner holds it; where that table cannot
    be read, a live process with the written pid is taken for the runner.
    """
    path = state_dir / RUNNER_LOCK
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    written = int(text) if text.isdigit() else None
    try:
        table = locks.read_text(encoding="ascii", errors="replace")
    except OSError:
        return written if written is not None and process_alive(written) else None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 10642 fe:00:1450181 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            holder = int(fields[4]) if fields[4].lstrip("-").isdigit() else -1
            # The table's pid is in the kernel's first namespace; the file's is ours.
            return written if written is not None else holder if holder > 0 else None
    return None


class QueueWatch:
    """Looks at the queue in `state_dir` every `interval_s` (`open/sample/close`).

    Args:
        state_dir: The user's queue state directory.
        interval_s: Seconds between looks.
        note: The last line the dashboard's own runner said (`gpuherd --queue`), if any.
        clock: Wall clock for `taken_at`.
    """

    role = QUEUE

    def __init__(
        self,
        state_dir: Path,
        interval_s: float = 1.0,
        note: Callable[[], str | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = "queue"
        self.state_dir = state_dir
        self.interval_s = interval_s
        self.note = note
        self.clock = clock
        self._db: sqlite3.Connection | None = None
        self._opened: tuple[int, int] | None = None
        """Device and inode of the file the connection reads."""
        self._last: tuple[int, tuple[QueueJobRow, ...], bool, tuple[Job, ...]] | None = None
        """`PRAGMA data_version` of the last read and what it read (rows, paused, the running
        jobs): while no other connection has committed since, the jobs are not read again (a
        look then costs a stat or two, and a liveness check per running job)."""
        self._ends: dict[tuple[int, int | None, float | None], JobEnd] = {}
        """Running jobs seen ended that no runner has recorded yet, by id and the attempt's
        supervisor (an OOM retry keeps its id): read once each."""
        self.reads = 0
        """How many looks read the jobs table (the others found the database unchanged)."""

    @property
    def path(self) -> Path:
        """The queue database."""
        return self.state_dir / DB_FILE

    def open(self) -> None:
        """Nothing to acquire: the database is opened at the first look that finds it."""

    def sample(self) -> QueueSnapshot:
        """One look; `CollectorError` when the database exists but cannot be read."""
        now = self.clock()
        note = self.note() if self.note is not None else None
        try:
            st = self.path.stat()
        except OSError:
            st = None
        if st is None or st.st_size == 0:  # none yet, or `queue add` is creating it right now
            self.close()
            return QueueSnapshot(now, exists=False, runner_note=note)
        if self._opened != (st.st_dev, st.st_ino):
            self.close()  # replaced (a corrupt one moved aside and a new one made): reopen
        try:
            db = self._connect()
            self._opened = (st.st_dev, st.st_ino)
            version = data_version(db)
            if self._last is None or self._last[0] != version:
                self._last = (version, *self._read(db))
                self.reads += 1
        except (sqlite3.Error, ValueError, KeyError, TypeError) as error:
            self.close()  # a database replaced or moved aside is opened afresh next time
            raise CollectorError(
                f"{self.path}: cannot read the queue: {error}", title="queue"
            ) from None
        _, jobs, paused, running = self._last
        runner = runner_pid(self.state_dir)
        if runner is not None:  # the runner records ends itself, within seconds
            running = ()
        return QueueSnapshot(
            now,
            exists=True,
            jobs=self._as_seen(jobs, running, now),
            paused=paused,
            runner_pid=runner,
            runner_note=note,
        )

    def _as_seen(
        self, rows: tuple[QueueJobRow, ...], running: tuple[Job, ...], now: float
    ) -> tuple[QueueJobRow, ...]:
        """The rows, a running job whose supervisor and command are gone shown as ended."""
        if not running and not self._ends:
            return rows
        # Only now: the session reader it brings is no part of a dashboard's first frame.
        from gpuherd.queue.liveness import as_ended, end_seen

        ended: dict[int, QueueJobRow] = {}
        attempts = {(job.id, job.pid, job.pid_start_time): job for job in running}
        for attempt, job in attempts.items():
            end = self._ends.get(attempt) or end_seen(job)
            if end is not None:
                self._ends[attempt] = end
                ended[job.id] = job_row(as_ended(job, end, now), None)
        for attempt in set(self._ends) - set(attempts):
            del self._ends[attempt]  # recorded by a runner since: the database says it now
        return tuple(ended.get(row.id, row) for row in rows) if ended else rows

    @staticmethod
    def _read(db: sqlite3.Connection) -> tuple[tuple[QueueJobRow, ...], bool, tuple[Job, ...]]:
        jobs, damaged = select_jobs(db)
        paused = select_paused(db)
        place = places(jobs)
        # A damaged row is shown as one, with why, and the rest of the queue as usual.
        shown = [
            *(job_row(job, place.get(job.id)) for job in jobs),
            *(
                QueueJobRow(
                    id=row.job_id, name="?", state=DAMAGED, gpus=0, need_bytes=0, reason=row.problem
                )
                for row in damaged
            ),
        ]
        running = tuple(job for job in jobs if job.state is JobState.RUNNING)
        return tuple(shown), paused, running

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_read_only(self.path, READ_TIMEOUT_S)
        return self._db

    def close(self) -> None:
        """Close the connection, if one was opened."""
        db, self._db = self._db, None
        self._last = self._opened = None
        if db is not None:
            db.close()


def queue_source(interval_s: float = 1.0) -> QueueWatch:
    """The dashboard's queue source: this user's queue in its default state directory."""
    return QueueWatch(default_state_dir(), interval_s)

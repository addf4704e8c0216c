"""Read MLflow's SQLite store (`mlflow.db`) read-only, safely while MLflow writes to it.

The database is opened with a `file:...?mode=ro` URI and `query_only`: gpuherd never writes
to it, never creates it, and never takes a write lock. Each query is one short read
transaction (the rows after the last row id read, at most `BATCH_ROWS`), so MLflow's writer
waits at most that long under a rollback journal and not at all under WAL. A NaN is stored
as `value = 0` with `is_nan = 1`; MLflow writes infinities as +-1.7976931348623157e308 with
`is_nan = 0`, which are read back as infinities.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from collectors.base import CollectorError
from collectors.trackers.common import RunRead
from collectors.trackers.mlflow_rows import sqlite_points

BATCH_ROWS = 2_000
"""Most rows read per sample: about the points of the 64 KiB a log tail reads at a time
(`collectors.trackers.common.READ_BUDGET_BYTES` says why few), and a short read transaction."""
BUSY_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class SqliteRun:
    """One run listed in the database."""

    run_uuid: str
    label: str
    """`<experiment>/<run name>` as MLflow's UI names it."""
    status: str | None


def connect(path: str) -> sqlite3.Connection:
    """A read-only connection to `path`; never creates or writes the file.

    Raises:
        CollectorError: the file is missing or is not an SQLite database.
    """
    uri = "file:" + _quote(os.path.abspath(path)) + "?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        connection.execute("PRAGMA query_only = 1")
    except sqlite3.Error as error:
        raise CollectorError(
            f"{path}: cannot open the MLflow database read-only ({error})", title="mlflow"
        ) from error
    return connection


def _quote(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def is_mlflow_database(path: str) -> bool:
    """Whether `path` is an SQLite file with MLflow's `runs` and `metrics` tables."""
    try:
        with open(path, "rb") as handle:
            if handle.read(16) != b"SQLite format 3\x00":
                return False
        connection = connect(path)
    except (OSError, CollectorError):
        return False
    try:
        names = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except sqlite3.Error:
        return False
    finally:
        connection.close()
    return {"runs", "metrics", "experiments"} <= names


def list_runs(connection: sqlite3.Connection) -> list[SqliteRun]:
    """Every run not deleted, oldest first, named `<experiment>/<run name>`."""
    rows = connection.execute(
        "SELECT r.run_uuid, r.name, r.status, e.name FROM runs r "
        "LEFT JOIN experiments e ON e.experiment_id = r.experiment_id "
        "WHERE r.lifecycle_stage IS NOT 'deleted' ORDER BY r.start_time, r.run_uuid"
    ).fetchall()
    return [
        SqliteRun(uuid, f"{exp}/{name or uuid}" if exp else (name or uuid), status)
        for uuid, name, status, exp in rows
    ]


class MlflowSqliteRun:
    """The metrics of one run of an `mlflow.db`, by row id: each read gives the rows added."""

    def __init__(self, db_path: str, run_uuid: str) -> None:
        self.db_path = db_path
        self.run_uuid = run_uuid
        self._connection: sqlite3.Connection | None = None
        self._last_rowid = 0
        self._names: dict[str, str] = {}

    def read(self, budget_rows: int = BATCH_ROWS) -> RunRead:
        """The run's rows added since the last read, with its name and status.

        Raises:
            CollectorError: the database cannot be read (locked longer than the busy
                timeout, damaged, gone).
        """
        if self._connection is None:
            self._connection = connect(self.db_path)
        try:
            rows = self._connection.execute(
                "SELECT rowid, key, value, timestamp, step, is_nan FROM metrics "
                "WHERE rowid > ? AND run_uuid = ? ORDER BY rowid LIMIT ?",
                (self._last_rowid, self.run_uuid, budget_rows),
            ).fetchall()
            run = self._connection.execute(
                "SELECT r.name, r.status, e.name FROM runs r LEFT JOIN experiments e "
                "ON e.experiment_id = r.experiment_id WHERE r.run_uuid = ?",
                (self.run_uuid,),
            ).fetchone()
        except sqlite3.Error as error:
            raise CollectorError(f"{self.db_path}: {error}", title="mlflow") from error
        out = RunRead(file_path=self.db_path, more=len(rows) >= budget_rows)
        if run is not None:
            name, out.status, exp = run
            out.label = f"{exp}/{name or self.run_uuid}" if exp else (name or self.run_uuid)
        sqlite_points(rows, self._names, out.metrics)
        if rows:
            self._last_rowid = rows[-1][0]
        try:
            out.modified_at = max(
                os.stat(p).st_mtime
                for p in (self.db_path, self.db_path + "-wal")
                if os.path.exists(p)
            )
        except (OSError, ValueError):
            pass
        out.read_bytes = out.size_bytes = self._last_rowid
        return out

    def close(self) -> None:
        """Close the connection (a read-only one holds no lock between reads)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

"""Follow one tracker run as a source of `LogBatch`es, as a log tail follows a log.

Everything downstream of a tail (the tasks panel, findings, `record`, the exporter) reads
these batches unchanged: each new point is one metric, numbered in the run (its "line"),
the NaN and Inf findings come from the same `findings_from_metric`, and a store's end
state of the run (`FINISHED`, `FAILED`, `KILLED`) is the batch's `ended_with`. A W&B run's
console (`files/output.log`) is digested as a log by `ConsoleTail`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from collectors.base import CollectorError
from collectors.roles import LOG
from collectors.samples import LogBatch
from collectors.trackers import stores
from collectors.trackers.common import STATUS_EXIT_CODES, RunRead
from collectors.trackers.console import ConsoleTail
from parsers.findings import findings_from_metric
from parsers.model import LogFinding, LogMetric

FORMATS = {
    stores.TENSORBOARD: "tensorboard",
    stores.MLFLOW_FILE: "mlflow",
    stores.MLFLOW_SQLITE: "mlflow_sqlite",
    stores.WANDB: "wandb",
}
"""The format a run's batches carry, by store (`mlflow` as for one metric file of it)."""


class RunReader(Protocol):
    """Reads what is new in one run (`collectors.trackers.tensorboard.TensorBoardRun`, ...)."""

    def read(self) -> RunRead:
        """The points added since the last read."""
        ...


def is_tracker_run(task_id: str) -> bool:
    """Whether a task id names a tracker's run (read from the disk: a directory, a database)."""
    return stores.run_kind(task_id) is not None


def open_reader(task_id: str, kind: str) -> RunReader:
    """The reader of one run.

    Raises:
        CollectorUnavailable: the library a store needs is not installed (TensorBoard).
    """
    if kind == stores.TENSORBOARD:
        from collectors.trackers.tensorboard import TensorBoardRun

        return TensorBoardRun(task_id)
    if kind == stores.MLFLOW_FILE:
        from collectors.trackers.mlflow_files import MlflowFileRun

        return MlflowFileRun(task_id)
    if kind == stores.MLFLOW_SQLITE:
        from collectors.trackers.mlflow_sqlite import MlflowSqliteRun

        db, _sep, run = task_id.rpartition(stores.RUN_SEPARATOR)
        return MlflowSqliteRun(db, run)
    from collectors.trackers.wandb_run import WandbRun

    return WandbRun(task_id)


def number_points(
    first: int, metrics: list[LogMetric], in_order: bool = True
) -> tuple[tuple[tuple[int, LogMetric], ...], tuple[tuple[int, LogFinding], ...]]:
    """Points in the order they were logged, numbered from `first`, and their findings.

    Args:
        first: the number of the first point.
        metrics: the points of one read.
        in_order: whether they come in the order they were logged; else they are put in the
            order of their times (MLflow's file store gives one metric file after another).
    """
    ordered = metrics if in_order else sorted(metrics, key=_time_of)
    numbered = tuple(enumerate(ordered, first))
    findings: list[tuple[int, LogFinding]] = []
    for number, metric in numbered:
        for _name, value in metric.values:
            if value - value != 0.0:  # NaN or an infinity: the only values with findings
                findings.extend((number, found) for found in findings_from_metric(metric))
                break
    return numbered, tuple(findings)


class TrackerRunCollector:
    """One run of a tracker's store; one `LogBatch` per sample, like `LogTailCollector`."""

    def __init__(
        self, task_id: str, *, poll_interval_s: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.name = f"log:{task_id}"
        self.role = LOG
        self.path = task_id
        self.task_id = task_id
        self.interval_s = 0.0  # `sample` waits itself, so `wake` can cut the wait short
        self.poll_interval_s = poll_interval_s
        self.kind: str | None = None
        self._clock = clock
        self._wake = threading.Event()
        self._more = True
        self._reader: RunReader | None = None
        self._console: ConsoleTail | None = None
        self._points = 0
        self._reported: set[str] = set()
        self._damage: str | None = None

    def open(self) -> None:
        """Tell the store from the disk and load its reader (a missing extra says what)."""
        self.kind = stores.run_kind(self.task_id)
        if self.kind is not None:
            self._reader = open_reader(self.task_id, self.kind)
        if self.kind == stores.WANDB:
            self._console = ConsoleTail(self.task_id)

    @property
    def reader(self) -> RunReader | None:
        """The run's reader, once `open` found the run."""
        return self._reader

    @property
    def backlog(self) -> bool:
        """Whether the last read left points to read (the next sample does not wait)."""
        return self._more

    def wake(self) -> None:
        """Cut the current wait short (at shutdown, or when a recording drains)."""
        self._wake.set()

    def sample(self) -> LogBatch:
        """Wait for the next look (or a wake-up), then read what the run added.

        Raises:
            CollectorError: the store cannot be read now (a locked or damaged database, a
                damaged record); the next sample tries again.
        """
        if self._damage is not None:  # found by the last read, whose points were handed on
            damage, self._damage = self._damage, None
            raise CollectorError(f"{self.path}: {damage}; the rest is read", title="trackers")
        if not self._more:
            self._wake.wait(self.poll_interval_s)
        self._wake.clear()
        now = self._clock()
        if self._reader is None:
            self.open()
            if self._reader is None:
                return LogBatch(self.path, now, None, waiting=True, file_path=self.path)
        read = self._reader.read()
        self._more = read.more
        numbered, findings = number_points(self._points + 1, read.metrics, read.in_order)
        self._points += len(numbered)
        console_metrics, console_findings, console_unparsed = self._read_console(now)
        numbered += console_metrics
        self._note_damage()
        if self._damage is not None and not numbered:
            return self.sample()  # nothing to hand on first: say it now
        status = read.status
        return LogBatch(
            self.path,
            now,
            FORMATS.get(self.kind or ""),
            numbered,
            findings + console_findings,
            lines_read=len(numbered),
            unparsed_lines=console_unparsed + _take_unparsed(self._reader),
            generation=1,
            file_path=read.file_path or self.path,
            offset_bytes=read.read_bytes,
            size_bytes=read.size_bytes,
            modified_at=read.modified_at,
            ended_with=STATUS_EXIT_CODES.get(status) if status else None,
            label=read.label,
        )

    def _read_console(
        self, now: float
    ) -> tuple[tuple[tuple[int, LogMetric], ...], tuple[tuple[int, LogFinding], ...], int]:
        """A W&B run's console: its metrics (only without the history), findings, unparsed."""
        if self._console is None:
            return (), (), 0
        parts = self._console.read(now)
        # with the history readable, the console's own metric lines would count twice
        history = getattr(self._reader, "record_class", None) is not None
        return (() if history else parts.metrics), parts.findings, parts.unparsed_lines

    def _note_damage(self) -> None:
        """Say once, at the next sample, that a file of the run was given up on."""
        damaged = getattr(self._reader, "damaged", None)
        for problem in [damaged] if isinstance(damaged, str) else damaged or []:
            if problem not in self._reported:
                self._reported.add(problem)
                self._damage = problem

    def close(self) -> None:
        """Close the database connection and the console file."""
        close = getattr(self._reader, "close", None)
        if close is not None:
            close()
        if self._console is not None:
            self._console.close()


def _time_of(metric: LogMetric) -> float:
    return metric.taken_at or 0.0


def _take_unparsed(reader: RunReader) -> int:
    count = getattr(reader, "unparsed", 0)
    if count:
        reader.unparsed = 0  # type: ignore[attr-defined]
    return int(count)

"""Replaying a session's parsed training metrics and findings as `LogBatch` samples."""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from collectors.rows import SessionFormatError, parse_float, parse_int
from collectors.samples import LogBatch
from collectors.session_reader import CsvStream, SessionReader
from parsers.model import LogFinding, LogMetric

METRICS_FILE = "metrics.csv"
METRICS_REQUIRED = ("t", "task", "metric", "value")
RESTART_FLAGS = {"rotated": "rotated", "truncated": "truncated", "recreated": "truncated"}
"""How a recorded `log_restarted` event is replayed. A re-creation becomes a truncation, which a
`TaskTracker` treats the same way; `recreated` is kept to mark the start of a new replay lap."""


@dataclass(frozen=True, slots=True)
class _Row:
    t: float
    task: str
    line: int | None
    metric: str
    value: float
    step: int | None
    epoch: float | None


class MetricRowDecoder:
    """Reads `metrics.csv` records by column name; unknown columns are skipped."""

    def __init__(self, header: list[str], where: str) -> None:
        missing = [c for c in METRICS_REQUIRED if c not in header]
        if missing:
            raise SessionFormatError(f"missing required column(s): {', '.join(missing)}",
                                     where, 1)
        self._where = where
        self._at = {name: header.index(name) for name in header}

    def row(self, line: int, cells: list[str]) -> _Row:
        """Decode one record; `SessionFormatError` names the file and line of a bad cell."""
        at, get = self._at, self._cell
        try:
            t = float(cells[at["t"]])
            value = float(cells[at["value"]])
            task, metric = cells[at["task"]], cells[at["metric"]]
            if not task or not metric or not math.isfinite(t):
                raise ValueError("empty task or metric, or a time that is not a number")
            return _Row(t, task, parse_int(get(cells, "line")), metric, value,
                        parse_int(get(cells, "step")), parse_float(get(cells, "epoch")))
        except ValueError as error:
            raise SessionFormatError(str(error), self._where, line) from None

    def _cell(self, cells: list[str], name: str) -> str:
        index = self._at.get(name)
        return cells[index] if index is not None else ""


def open_metrics(reader: SessionReader) -> CsvStream | None:
    """`metrics.csv` of the session, header checked; `None` when absent or empty (a warning)."""
    path = reader.directory / METRICS_FILE
    if not path.is_file():
        return None
    if path.stat().st_size == 0:
        reader.warnings.add(f"{path}: empty, ignored")
        return None
    stream = reader.open_csv(METRICS_FILE)
    try:
        MetricRowDecoder(stream.header, str(path))
    except SessionFormatError:
        stream.close()
        raise
    return stream


def check_metrics(reader: SessionReader) -> None:
    """Read every `metrics.csv` row once; `SessionFormatError` at the first bad one."""
    for _ in metric_batches(reader):
        pass


class MetricsSource:
    """The rows callable of a replay collector: each call starts one more lap of the session.

    Every task's first batch on a lap after the first is marked `recreated`, so the dashboard
    can start that task over instead of taking the repeated steps for a rewrite of its log.
    """

    def __init__(self, reader: SessionReader) -> None:
        self._reader = reader
        self._laps = 0

    def __call__(self) -> Iterator[LogBatch]:
        """The batches of the next lap."""
        lap, self._laps = self._laps, self._laps + 1
        return metric_batches(self._reader, new_lap=lap > 0)


def metric_batches(reader: SessionReader, *, new_lap: bool = False,
                   ) -> Generator[LogBatch, None, None]:
    """One `LogBatch` per run of `metrics.csv` rows with the same task and time, in file order.

    Rows of one parsed line (same task, time, line, step and epoch) become one `LogMetric`
    without a time of its own, so the batch's (replayed, possibly lap-shifted) time applies.
    `finding` events from `events.jsonl` come as batches of their own at their recorded time,
    and a `log_restarted` event marks the task's next batch as a new file generation. The format
    of each task is the one `meta.json` lists under `tasks`.
    """
    events = _log_events(reader)
    pending = next(events, None)
    state = _Generations(new_lap, _formats(reader.meta))
    stream = open_metrics(reader)
    try:
        for batch_rows in _row_groups(stream) if stream is not None else ():
            first = batch_rows[0]
            while pending is not None and pending[0] <= first.t:
                found = state.event(pending)
                if found is not None:
                    yield found
                pending = next(events, None)
            yield state.batch(first.task, first.t, batch_rows)
    finally:
        if stream is not None:
            stream.close()
    while pending is not None:
        found = state.event(pending)
        if found is not None:
            yield found
        pending = next(events, None)


def _row_groups(stream: CsvStream) -> Iterator[list[_Row]]:
    decoder = MetricRowDecoder(stream.header, str(stream.path))
    group: list[_Row] = []
    records = iter(stream)
    while True:
        try:
            record = next(records, None)
            if record is None:
                break
            row = decoder.row(*record)
        except SessionFormatError:
            if group:
                yield group  # the rows before a bad line are shown; the error comes next
            raise
        if group and (row.task != group[0].task or row.t != group[0].t):
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def _log_events(reader: SessionReader) -> Iterator[tuple[float, dict[str, Any]]]:
    """`(t, event)` of the findings and log restarts in `events.jsonl`, in file order."""
    for event in reader.events():
        if event.get("kind") not in ("finding", "log_restarted") or not event.get("task"):
            continue
        t = event.get("t")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            yield float(t), event


def _formats(meta: dict[str, Any]) -> dict[str, str]:
    tasks = meta.get("tasks")
    if not isinstance(tasks, list):
        return {}
    return {str(t["task"]): str(t["format"]) for t in tasks
            if isinstance(t, dict) and t.get("task") and t.get("format")}


class _Generations:
    """File generation and restart flags per task, as a live tail would report them."""

    def __init__(self, new_lap: bool, formats: dict[str, str]) -> None:
        self._new_lap = new_lap
        self._formats = formats
        self._generation: dict[str, int] = {}
        self._restart: dict[str, str] = {}

    def _start(self, task: str) -> dict[str, Any]:
        flags: dict[str, Any] = {}
        if task not in self._generation:
            self._generation[task] = 1
            if self._new_lap:
                flags["recreated"] = True
        how = self._restart.pop(task, None)
        if how is not None:
            self._generation[task] += 1
            flags[how] = True
        flags["generation"] = self._generation[task]
        flags["format"] = self._formats.get(task)
        return flags

    def batch(self, task: str, t: float, rows: list[_Row]) -> LogBatch:
        metrics: list[tuple[int, LogMetric]] = []
        values: list[tuple[str, float]] = []
        key: tuple[int | None, int | None, float | None] | None = None
        for row in rows:
            row_key = (row.line, row.step, row.epoch)
            if key is not None and row_key != key:
                metrics.append((key[0] or 0, LogMetric(tuple(values), key[1], key[2])))
                values = []
            key = row_key
            values.append((row.metric, row.value))
        if key is not None:
            metrics.append((key[0] or 0, LogMetric(tuple(values), key[1], key[2])))
        return LogBatch(task, t, metrics=tuple(metrics), lines_read=len(metrics),
                        file_path=task, **self._start(task))

    def event(self, item: tuple[float, dict[str, Any]]) -> LogBatch | None:
        t, event = item
        task = str(event["task"])
        if event["kind"] == "log_restarted":
            self._restart[task] = RESTART_FLAGS.get(str(event.get("how")), "truncated")
            return None
        line = event.get("line")
        line_no = line if isinstance(line, int) and not isinstance(line, bool) else 0
        finding = LogFinding(str(event.get("finding") or "finding"),
                             str(event.get("evidence") or ""))
        return LogBatch(task, t, findings=((line_no, finding),), file_path=task,
                        **self._start(task))

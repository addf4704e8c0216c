"""Replaying a session's parsed training metrics and findings as `LogBatch` samples."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from collectors.samples import LogBatch
from collectors.session import cells as cells_mod
from collectors.session.row_decoders import read_key
from collectors.session.rows import CellTally, RowError, check_header, column_index
from collectors.session.session_csv import CsvStream
from collectors.session.session_format import COMMAND_TASK, EVENT, META, METRICS_FILE
from parsers.model import LogFinding, LogMetric


class SessionReader(Protocol):
    """What replaying `metrics.csv` needs of `collectors.session.session_reader.SessionReader`.

    A protocol, not an import: the reader checks `metrics.csv` through this module, so
    importing it back would tie the two modules into an import cycle.
    """

    @property
    def headers(self) -> dict[str, list[str]]:
        """Each CSV file's header, by file name."""

    @property
    def meta(self) -> dict[str, Any]:
        """`meta.json`."""

    def open_csv(self, name: str) -> CsvStream:
        """Open one CSV file for streaming."""

    def events(self) -> Generator[dict[str, Any], None, None]:
        """The valid objects of `events.jsonl`."""


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
    """Reads `metrics.csv` records by column name; unknown columns are skipped.

    A row without a valid time, task, metric or value is skipped (`RowError`); a bad `line`,
    `step` or `epoch` reads as `None` and is counted.
    """

    def __init__(self, header: list[str], where: str) -> None:
        check_header(header, METRICS_FILE, where)
        self._at = column_index(header)
        self._get = {name: self._at.get(name) for name in ("line", "step", "epoch")}

    def key(self, cells: list[str]) -> float:
        """The row's time after checking its task, metric and value; `RowError` if not valid."""
        at = self._at
        if not cells[at["task"]] or not cells[at["metric"]]:
            raise RowError("empty task or metric")
        try:
            cells_mod.read_value(cells[at["value"]])
        except ValueError:
            raise RowError(f"value: {cells_mod.VALUE.why(cells[at['value']])}") from None
        return float(read_key(cells, at["t"], "t", cells_mod.TIME))

    def row(self, line: int, cells: list[str], tally: CellTally | None = None) -> _Row:
        """Decode one record; `RowError` when it cannot be placed."""
        t = self.key(cells)
        at = self._at
        extra = {}
        for name, rule in (
            ("line", cells_mod.LINE),
            ("step", cells_mod.STEP),
            ("epoch", cells_mod.EPOCH),
        ):
            index = self._get[name]
            text = cells[index] if index is not None else ""
            value, bad = rule.read(text)
            if bad and tally is not None:
                tally.bad_cell(line, name, rule.why(text))
            extra[name] = value
        line_no, step = extra["line"], extra["step"]
        return _Row(
            t,
            cells[at["task"]],
            None if line_no is None else int(line_no),
            cells[at["metric"]],
            cells_mod.read_value(cells[at["value"]]),
            None if step is None else int(step),
            extra["epoch"],
        )


def open_metrics(reader: SessionReader) -> CsvStream | None:
    """`metrics.csv` of the session, header checked; `None` when absent or empty (a warning)."""
    if METRICS_FILE not in reader.headers:
        return None
    return reader.open_csv(METRICS_FILE)


def check_metrics(reader: SessionReader) -> None:
    """Read every `metrics.csv` row once, counting the bad ones in the reader's warnings."""
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


def metric_batches(
    reader: SessionReader,
    *,
    new_lap: bool = False,
) -> Generator[LogBatch, None, None]:
    """One `LogBatch` per run of `metrics.csv` rows with the same task and time, in file order.

    Rows of one parsed line (same task, time, line, step and epoch) become one `LogMetric`
    without a time of its own, so the batch's (replayed, possibly lap-shifted) time applies.
    `finding` events from `events.jsonl` come as batches of their own at their recorded time,
    and a `log_restarted` event marks the task's next batch as a new file generation. The
    recorded command's `exit` event comes as a batch of its task (`ended_with`), so the
    command's row ends when the command did. The format
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
    for line, cells in stream:
        try:
            row = decoder.row(line, cells, stream.tally)
        except RowError as error:
            stream.tally.skip(line, str(error))
            continue
        if group and (row.task != group[0].task or row.t != group[0].t):
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def _log_events(reader: SessionReader) -> Iterator[tuple[float, dict[str, Any]]]:
    """`(t, event)` of the findings, log restarts and command exits in `events.jsonl`."""
    command = bool(reader.meta.get(META.command))
    for event in reader.events():
        kind = event.get("kind")
        if kind == EVENT.exit:
            if command and _is_int(event.get("exit_code")):
                yield float(event["t"]), event
            continue
        if kind not in (EVENT.finding, EVENT.log_restarted) or not event.get("task"):
            continue
        yield float(event["t"]), event  # the reader checked it


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _formats(meta: dict[str, Any]) -> dict[str, str]:
    tasks = meta.get(META.tasks)
    if not isinstance(tasks, list):
        return {}
    return {
        str(t["task"]): str(t["format"])
        for t in tasks
        if isinstance(t, dict) and t.get("task") and t.get("format")
    }


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
        return LogBatch(
            task,
            t,
            metrics=tuple(metrics),
            lines_read=len(metrics),
            file_path=task,
            **self._start(task),
        )

    def event(self, item: tuple[float, dict[str, Any]]) -> LogBatch | None:
        t, event = item
        if event["kind"] == EVENT.exit:
            return LogBatch(
                COMMAND_TASK,
                t,
                file_path=COMMAND_TASK,
                ended_with=int(event["exit_code"]),
                **self._start(COMMAND_TASK),
            )
        task = str(event["task"])
        if event["kind"] == EVENT.log_restarted:
            self._restart[task] = RESTART_FLAGS.get(str(event.get("how")), "truncated")
            return None
        line = event.get("line")
        line_no = line if isinstance(line, int) and not isinstance(line, bool) else 0
        finding = LogFinding(
            str(event.get("finding") or "finding"), str(event.get("evidence") or "")
        )
        return LogBatch(
            task, t, findings=((line_no, finding),), file_path=task, **self._start(task)
        )

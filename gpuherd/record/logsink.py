"""Parsed log batches into `metrics.csv` rows and `finding` events of a session directory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from collectors.samples import LogBatch
from gpuherd.session import SessionWriter

# metrics.csv columns (docs/session-format.md). Kept here, not beside the pandas readers, so
# recording (and the dashboard that can record) never pays for importing pandas.
METRICS_COLUMNS = ("t", "task", "line", "metric", "value", "step", "epoch")

METRICS_FILE = "metrics.csv"
PROGRESS_ROW_INTERVAL_S = 1.0
"""A progress bar rewrites one line many times a second; keep one row per second of it (and
always its last state)."""


@dataclass
class _TaskState:
    label: str
    line: int | None = None
    written_t: float = float("-inf")
    pending: list[dict[str, Any]] = field(default_factory=list)
    format: str | None = None
    lines: int = 0
    unparsed: int = 0
    metric_rows: int = 0
    findings: int = 0


def metric_rows(task: str, line: int, metric: Any, t: float) -> list[dict[str, Any]]:
    """The `metrics.csv` rows of one parsed line: one per (metric name, value)."""
    when = metric.taken_at if metric.taken_at is not None else t
    return [{"t": when, "task": task, "line": line, "metric": name, "value": value,
             "step": metric.step, "epoch": metric.epoch} for name, value in metric.values]


class LogSink:
    """A recorder handler for `LogBatch` samples (runs on the recorder's writer thread).

    Each followed log is a task, named by `labels` (the command's own `command.log` is
    `command`) or by its path.
    """

    def __init__(self, labels: Mapping[str, str] | None = None) -> None:
        self._labels = dict(labels or {})
        self._tasks: dict[str, _TaskState] = {}
        self.offsets: dict[str, int] = {}
        """Bytes read so far per followed path (written on the writer thread, read anywhere)."""

    def __call__(self, writer: SessionWriter, batch: LogBatch) -> None:
        """Write one batch: metric rows to `metrics.csv`, findings to `events.jsonl`."""
        state = self._state(batch.path)
        self.offsets[batch.path] = batch.offset_bytes
        state.format = batch.format or state.format
        state.lines += batch.lines_read
        state.unparsed += batch.unparsed_lines
        if batch.starts_generation:
            how = "rotated" if batch.rotated else "truncated" if batch.truncated else "recreated"
            self._flush(writer, state)
            state.line = None
            writer.write_event({"kind": "log_restarted", "task": state.label, "how": how})
        rows: list[dict[str, Any]] = []
        for line, metric in batch.metrics:
            rows += self._progress(state, line, metric_rows(state.label, line, metric,
                                                            batch.taken_at))
        self._write(writer, state, rows)
        for line, finding in batch.findings:
            state.findings += 1
            writer.write_event({"t": batch.taken_at, "kind": "finding", "task": state.label,
                                "line": line, "finding": finding.kind,
                                "evidence": finding.evidence})

    def flush(self, writer: SessionWriter) -> None:
        """Write the last state of every progress line held back (at the end of recording)."""
        for state in self._tasks.values():
            self._flush(writer, state)

    def tasks_meta(self) -> list[dict[str, Any]]:
        """Per task: label, path, format and line counts, for `meta.json`."""
        return [{"task": s.label, "path": path, "format": s.format, "lines": s.lines,
                 "unparsed_lines": s.unparsed, "metric_rows": s.metric_rows,
                 "findings": s.findings} for path, s in self._tasks.items()]

    def _state(self, path: str) -> _TaskState:
        state = self._tasks.get(path)
        if state is None:
            state = self._tasks[path] = _TaskState(self._labels.get(path, path))
        return state

    def _progress(self, state: _TaskState, line: int,
                  rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows to write now; a rewrite of the same line within a second is held back."""
        if not rows:
            return []
        t = rows[0]["t"]
        if line != state.line:
            held, state.pending = state.pending, []
            state.line, state.written_t = line, t
            return held + rows
        if t - state.written_t >= PROGRESS_ROW_INTERVAL_S:
            state.pending, state.written_t = [], t
            return rows
        state.pending = rows
        return []

    def _flush(self, writer: SessionWriter, state: _TaskState) -> None:
        held, state.pending = state.pending, []
        self._write(writer, state, held)

    def _write(self, writer: SessionWriter, state: _TaskState,
               rows: list[dict[str, Any]]) -> None:
        if rows:
            state.metric_rows += len(rows)
            writer.append_rows(METRICS_FILE, METRICS_COLUMNS, rows)

"""Parsed log batches into `metrics.csv` rows and `finding` events of a session directory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from collectors.samples import LogBatch
from collectors.session.rows import QuotedCells, metric_lines
from collectors.session.session_format import EVENT, METRICS_COLUMNS, METRICS_FILE
from gpuherd.session.session import SessionWriter

PROGRESS_ROW_INTERVAL_S = 1.0
"""A progress bar rewrites one line many times a second; keep one row per second of it (and
always its last state)."""


@dataclass
class _TaskState:
    label: str
    line: int | None = None
    written_t: float = float("-inf")
    pending: list[str] = field(default_factory=list)
    format: str | None = None
    lines: int = 0
    unparsed: int = 0
    metric_rows: int = 0
    findings: int = 0
    findings_dropped: int = 0
    quoted_label: str = ""


def lost_event(task: str, batch: LogBatch) -> dict[str, Any]:
    """The `log_dropped` event of lines a copytruncate cut away before they were read."""
    lines = batch.lost_lines_estimate
    about = (
        f"about {lines:,} lines ({batch.lost_bytes:,} bytes)"
        if lines is not None
        else f"{batch.lost_bytes:,} bytes"
    )
    event: dict[str, Any] = {
        "t": batch.taken_at,
        "kind": EVENT.log_dropped,
        "source": task,
        "task": task,
        "path": batch.path,
        "lost_bytes": batch.lost_bytes,
        "reason": "cut",
        "msg": f"{about} of {batch.path} lost when it was cut (copytruncate): written after "
        "the copy was made, or in no copy found beside the log",
    }
    if lines is not None:
        event["lost_lines_estimate"] = lines
    return event


class LogSink:
    """A recorder handler for `LogBatch` samples (runs on the recorder's writer thread).

    Each followed log is a task, named by `labels` (the command's own `command.log` is
    `command`) or by its path. Rows are plain tuples written in one `append_cells` call per
    batch: at 100,000 lines a second, a dict and a cell conversion per value cost more than
    parsing the line.
    """

    def __init__(self, labels: Mapping[str, str] | None = None) -> None:
        self._labels = dict(labels or {})
        self._tasks: dict[str, _TaskState] = {}
        self._quoted = QuotedCells()
        self.offsets: dict[str, int] = {}
        """Bytes read so far per followed path (written on the writer thread, read anywhere)."""
        self.seen: dict[str, tuple[int, int]] = {}
        """Per followed path, the file generation being read and its size when the tail last
        looked (a renamed file is read to its end after the path names another one)."""

    def __call__(self, writer: SessionWriter, batch: LogBatch) -> None:
        """Write one batch: metric rows to `metrics.csv`, findings to `events.jsonl`."""
        state = self._state(batch.path, batch.label)
        self.offsets[batch.path] = batch.offset_bytes
        self.seen[batch.path] = (batch.generation, batch.size_bytes or 0)
        state.format = batch.format or state.format
        state.lines += batch.lines_read
        state.unparsed += batch.unparsed_lines
        state.findings_dropped += batch.findings_dropped
        if batch.starts_generation:
            how = "rotated" if batch.rotated else "truncated" if batch.truncated else "recreated"
            self._flush(writer, state)
            state.line = None
            writer.write_event({"kind": "log_restarted", "task": state.label, "how": how})
        if batch.lost_bytes:
            writer.write_event(lost_event(state.label, batch))
        if batch.notice:
            writer.write_event(
                {
                    "t": batch.taken_at,
                    "kind": EVENT.log_polling,
                    "task": state.label,
                    "msg": batch.notice,
                }
            )
        if batch.metrics:
            self._write(writer, state, self._rows(state, batch))
        for line, finding in batch.findings:
            state.findings += 1
            writer.write_event(
                {
                    "t": batch.taken_at,
                    "kind": "finding",
                    "task": state.label,
                    "line": line,
                    "finding": finding.kind,
                    "evidence": finding.evidence,
                }
            )

    def _rows(self, state: _TaskState, batch: LogBatch) -> list[str]:
        """The `metrics.csv` lines to write now, one per (metric name, value) of each line.

        A progress bar rewrites one line many times a second: a rewrite of the same line
        within `PROGRESS_ROW_INTERVAL_S` is held back (`state.pending`), and only its last
        state is written when the log moves on. Cells are written as `csv` writes them:
        floats by `repr`, `None` as the empty cell.
        """
        quoted, label, batch_t = self._quoted, state.quoted_label, batch.taken_at
        batch_t_text = repr(batch_t)
        out: list[str] = []
        # The task's progress state in locals, stored back once: this loop runs per line.
        last_line, written_t, pending = state.line, state.written_t, state.pending
        for line, metric in batch.metrics:
            values = metric.values
            if not values:
                continue
            t = metric.taken_at
            if t is None:
                t, t_text = batch_t, batch_t_text
            else:
                t_text = repr(t)
            rows = metric_lines(t_text, label, line, values, metric.step, metric.epoch, quoted)
            if line != last_line:  # a new line: the common case, its rows go straight out
                if pending:
                    out += pending
                    pending = []
                last_line, written_t = line, t
                out += rows
                continue
            if t - written_t >= PROGRESS_ROW_INTERVAL_S:
                pending, written_t = [], t
                out += rows
            else:
                pending = rows
        state.line, state.written_t, state.pending = last_line, written_t, pending
        return out

    def flush(self, writer: SessionWriter) -> None:
        """Write the last state of every progress line held back (at the end of recording)."""
        for state in self._tasks.values():
            self._flush(writer, state)

    def tasks_meta(self) -> list[dict[str, Any]]:
        """Per task: label, path, format and line counts, for `meta.json`."""
        return [
            {
                "task": s.label,
                "path": path,
                "format": s.format,
                "lines": s.lines,
                "unparsed_lines": s.unparsed,
                "metric_rows": s.metric_rows,
                "findings": s.findings,
                "findings_dropped": s.findings_dropped,
            }
            for path, s in self._tasks.items()
        ]

    def label(self, path: str) -> str:
        """The task name of a followed path."""
        state = self._tasks.get(path)
        return state.label if state is not None else self._labels.get(path, path)

    def _state(self, path: str, named: str | None = None) -> _TaskState:
        """The task of `path`, named by `labels`, else as its source names it, else by its path.

        A tracker's run name (`demo/good-run`) may come after the first batches: the task
        takes it while nothing is written under the old name (a task is never split).
        """
        state = self._tasks.get(path)
        label = self._labels.get(path) or named or path
        if state is None:
            state = self._tasks[path] = _TaskState(label, quoted_label=self._quoted[label])
        elif label != state.label and not (state.metric_rows or state.pending or state.findings):
            state.label, state.quoted_label = label, self._quoted[label]  # a W&B run's name
        return state

    def _flush(self, writer: SessionWriter, state: _TaskState) -> None:
        held, state.pending = state.pending, []
        self._write(writer, state, held)

    def _write(self, writer: SessionWriter, state: _TaskState, rows: list[str]) -> None:
        if rows:
            state.metric_rows += len(rows)
            writer.append_csv_lines(METRICS_FILE, METRICS_COLUMNS, "".join(rows))

"""CSV metric files: Lightning `metrics.csv`, timm `summary.csv`, YOLO `results.csv`, SB3."""

from __future__ import annotations

import csv

from parsers import sb3
from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line, parse_number
from parsers.values import to_epoch, to_step, value_error

# Stable-Baselines3's `progress.csv` has its console table's keys as columns: its step is
# `time/total_timesteps` (environment steps), and its counters are no measurements
STEP_COLUMNS = frozenset({"step", "global_step", "iteration", "iter", sb3.STEP_KEY})
"""Column names (lower-cased) whose cells are the row's step."""
EPOCH_COLUMNS = frozenset({"epoch"})
"""Column names (lower-cased) whose cells are the row's epoch."""
# YOLO's `time` is the run's elapsed seconds, TensorBoard's `Wall time` a clock: no metrics
_SKIP_COLUMNS = frozenset({"time", "created", "timestamp", "wall time"}) | sb3.NOT_MEASUREMENTS
_ROLES = {
    **dict.fromkeys(_SKIP_COLUMNS, "skip"),
    **dict.fromkeys(STEP_COLUMNS, "step"),
    **dict.fromkeys(EPOCH_COLUMNS, "epoch"),
}
"""What a column is when it is not a metric, by its lower-case name."""


MISSING_CELLS = frozenset({"", "na", "n/a", "none", "null", "-"})
"""Cells (lower-cased) that writers put where a column has no value this row: Keras'
`CSVLogger` writes `NA` for a metric not logged that epoch, a `str(None)` gives `None`. Skipped
like empty cells, never counted as unparsed."""


class CsvParser:
    """A CSV file whose first non-empty line is its header; each later row is one metric.

    A cell that is empty or a `MISSING_CELLS` word is skipped; any other cell that is not a
    number (`tensor(1.2)`), and a step or epoch cell that is no count, is an unparsed cell:
    left out and counted in the metric's `unparsed_values`, the rest of the row kept. A later
    row is never a header: a row equal to the header (files appended to by a second run) is
    skipped, one of text only is unparsed. Columns without a name (the index column of a
    pandas `to_csv()` file) are ignored.
    """

    def __init__(self) -> None:
        self.names: list[str] | None = None
        self.columns: list[str] = []
        self._roles: list[str | None] = []
        self._headerless = False

    def feed(self, line: str) -> LogMetric | None:
        """Parse the header or one data row.

        Raises:
            ValueError: a row that is not CSV, has more cells than the header or no usable
                cell, or any row of a file whose first line holds only numbers (no header).
        """
        line = normalise_line(line)
        if not line.strip():
            return None
        try:
            cells = next(csv.reader([line]))
        except csv.Error as error:  # a stray newline or NUL inside the row
            raise value_error(f"not a CSV row: {error}", error)  # noqa: B904
        if self.names is None:
            self._header(cells)
            return None
        if len(cells) > len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, header has {len(self.columns)}")
        return self._row(cells)

    def _header(self, cells: list[str]) -> None:
        columns = [cell.strip() for cell in cells]
        columns[0] = columns[0].lstrip("\ufeff").strip()  # a byte-order mark opens the file
        named = [column for column in columns if column]
        if self._headerless or all(_is_number(column) for column in named):
            self._headerless = True  # `all` of no names is true too
            raise ValueError("the file's first line is no header: it names no column")
        self.columns = columns
        self.names = [sb3.NAMES.get(column) or metric_name(column) for column in columns]
        self._roles = [_ROLES.get(column.lower()) if column else "skip" for column in columns]

    def _row(self, cells: list[str]) -> LogMetric | None:
        assert self.names is not None
        values: list[tuple[str, float]] = []
        step: int | None = None
        epoch: float | None = None
        bad = 0
        for role, name, cell in zip(self._roles, self.names, cells, strict=False):
            if not cell or role == "skip":
                continue
            try:
                number = float(cell)  # the common case; float() also skips whitespace
                if role is None:
                    values.append((name, number))
                elif role == "step":
                    step = to_step(number)
                else:
                    epoch = to_epoch(number)
            except ValueError:
                bad += _bad_cell(cell, role, name, values)
        if values:
            return LogMetric(tuple(values), step, epoch, unparsed_values=bad)
        if bad and [cell.strip() for cell in cells] != self.columns:
            raise ValueError(f"{bad} cell(s) not numbers: {','.join(cells)[:80]!r}")
        return None  # empty cells only, or the header again

    def reset(self) -> None:
        """Forget the header (the file was truncated or replaced)."""
        self.names = None
        self.columns = []
        self._headerless = False


def _bad_cell(cell: str, role: str | None, name: str, values: list[tuple[str, float]]) -> int:
    """0 for a missing-value cell; 1 for an unparsed one, or its value added to `values`."""
    text = cell.strip()
    if text.lower() in MISSING_CELLS:
        return 0
    if role is None:
        try:
            values.append((name, parse_number(text)))  # `12%`, `1,234.5`, `'0.5'`, `nan`
            return 0
        except ValueError:
            pass
    return 1


def _is_number(text: str) -> bool:
    try:
        parse_number(text)
    except ValueError:
        return False
    return True

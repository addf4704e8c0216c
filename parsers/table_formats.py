"""CSV metric files (Lightning `metrics.csv`, timm `summary.csv`, YOLO `results.csv`)."""

from __future__ import annotations

import csv

from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line, parse_number

_STEP_COLUMNS = frozenset({"step", "global_step", "iteration", "iter"})
_EPOCH_COLUMNS = frozenset({"epoch"})
# YOLO's `time` is the run's elapsed seconds, not a metric
_SKIP_COLUMNS = frozenset({"time", "created", "timestamp"})
_ROLES = {**dict.fromkeys(_SKIP_COLUMNS, "skip"), **dict.fromkeys(_STEP_COLUMNS, "step"),
          **dict.fromkeys(_EPOCH_COLUMNS, "epoch")}
"""What a column is when it is not a metric, by its lower-case name."""


class CsvParser:
    """A CSV file with a header row; each later row is one metric, empty cells are skipped.

    The first row whose cells are not all numbers is the header (a rewritten file that repeats
    its header simply replaces it).
    """

    def __init__(self) -> None:
        self.names: list[str] | None = None
        self.columns: list[str] = []
        self._roles: list[str | None] = []

    def feed(self, line: str) -> LogMetric | None:
        """Parse the header or one data row.

        Raises:
            ValueError: a data row with a cell that is not a number, or with more cells than
                the header.
        """
        line = normalise_line(line)
        if not line.strip():
            return None
        try:
            cells = next(csv.reader([line]))
        except csv.Error as error:  # a stray newline or NUL inside the row
            raise ValueError(f"not a CSV row: {error}") from error
        numbers = _numbers(cells)
        if numbers is None:
            self.columns = [cell.strip() for cell in cells]
            self.names = [metric_name(column) for column in self.columns]
            self._roles = [_ROLES.get(column.lower()) for column in self.columns]
            return None
        if self.names is None:
            return None  # data before any header: nothing to name the values by
        if len(cells) > len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, header has {len(self.columns)}")
        return self._row(numbers)

    def _row(self, numbers: list[float | None]) -> LogMetric | None:
        assert self.names is not None
        values: list[tuple[str, float]] = []
        step: int | None = None
        epoch: float | None = None
        for role, name, number in zip(self._roles, self.names, numbers, strict=False):
            if number is None:
                continue
            if role is None:
                values.append((name, number))
            elif role == "step":
                step = int(number)
            elif role == "epoch":
                epoch = number
        if not values:
            return None
        return LogMetric(values=tuple(values), step=step, epoch=epoch)

    def reset(self) -> None:
        """Forget the header (the file was truncated or replaced)."""
        self.names = None
        self.columns = []


def _numbers(cells: list[str]) -> list[float | None] | None:
    """Each cell as a number (`None` when empty), or `None` when one is not a number."""
    numbers: list[float | None] = []
    for cell in cells:
        cell = cell.strip()
        if not cell:
            numbers.append(None)
            continue
        try:
            numbers.append(parse_number(cell))
        except ValueError:
            return None
    return numbers

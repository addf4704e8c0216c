"""CSV metric files (Lightning `metrics.csv`, timm `summary.csv`, YOLO `results.csv`)."""

from __future__ import annotations

import csv

from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line, parse_number

_STEP_COLUMNS = frozenset({"step", "global_step", "iteration", "iter"})
_EPOCH_COLUMNS = frozenset({"epoch"})
# YOLO's `time` is the run's elapsed seconds, not a metric
_SKIP_COLUMNS = frozenset({"time", "created", "timestamp"})


class CsvParser:
    """A CSV file with a header row; each later row is one metric, empty cells are skipped.

    The first row whose cells are not all numbers is the header (a rewritten file that repeats
    its header simply replaces it).
    """

    def __init__(self) -> None:
        self.names: list[str] | None = None
        self.columns: list[str] = []

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
        if self.names is None or not _numeric_row(cells):
            if _numeric_row(cells):
                return None  # data before any header: nothing to name the values by
            self.columns = [cell.strip() for cell in cells]
            self.names = [metric_name(column) for column in self.columns]
            return None
        if len(cells) > len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, header has {len(self.columns)}")
        return self._row(cells)

    def _row(self, cells: list[str]) -> LogMetric | None:
        assert self.names is not None
        values: list[tuple[str, float]] = []
        step: int | None = None
        epoch: float | None = None
        for column, name, cell in zip(self.columns, self.names, cells, strict=False):
            cell = cell.strip()
            if not cell:
                continue
            low = column.lower()
            if low in _STEP_COLUMNS:
                step = int(parse_number(cell))
            elif low in _EPOCH_COLUMNS:
                epoch = parse_number(cell)
            elif low not in _SKIP_COLUMNS:
                values.append((name, parse_number(cell)))
        if not values:
            return None
        return LogMetric(values=tuple(values), step=step, epoch=epoch)

    def reset(self) -> None:
        """Forget the header (the file was truncated or replaced)."""
        self.names = None
        self.columns = []


def _numeric_row(cells: list[str]) -> bool:
    for cell in cells:
        cell = cell.strip()
        if cell:
            try:
                parse_number(cell)
            except ValueError:
                return False
    return True

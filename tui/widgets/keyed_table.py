"""Bring a DataTable in step with a list of keyed rows, touching only the cells that changed."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Protocol, TypeVar

from rich.text import Text
from textual.widgets import DataTable

from tui.text import same_text


class KeyedRow(Protocol):
    """A row with a stable key (a GPU UUID and pid, a task id) that becomes the table's row key."""

    @property
    def key(self) -> str:
        """The row key."""


R = TypeVar("R", bound=KeyedRow)


def update_rows(
    table: DataTable[Text],
    shown: MutableMapping[str, R],
    rows: Sequence[R],
    cells: Callable[[R], Sequence[tuple[str, Text]]],
    same_row: Callable[[R, R], bool] | None = None,
) -> None:
    """Remove the rows no longer wanted, add the new ones, update only the cells that changed.

    Never `clear()`, so the cursor and the scroll position survive; the order of new rows is
    the order of `rows`, and reordering existing ones is the caller's business.

    Args:
        table: The table, whose columns are those `cells` names.
        shown: What the table shows now, by row key; updated to `rows`.
        rows: What it should show.
        cells: A row's cells.
        same_row: A cheap test that a row did not change at all, to skip building its cells
            (leave it out where row equality misses a change, e.g. a `Text`'s base style).
    """
    wanted = {row.key for row in rows}
    for key in [k for k in shown if k not in wanted]:
        table.remove_row(key)
        del shown[key]
    for row in rows:
        old = shown.get(row.key)
        if old is None:
            table.add_row(*(text for _, text in cells(row)), key=row.key)
        elif same_row is None or not same_row(old, row):
            for (column, new_text), (_, old_text) in zip(cells(row), cells(old), strict=True):
                if not same_text(new_text, old_text):
                    table.update_cell(row.key, column, new_text)
        shown[row.key] = row

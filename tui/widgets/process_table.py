"""The process table: rows keyed by (GPU UUID, pid), updated cell by cell."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.coordinate import Coordinate
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowKey

from gpuherd.present.format import fmt_bytes, fmt_duration, fmt_pct, fmt_text, visible
from tui.processes import ProcessRow
from tui.widgets.keyed_table import update_rows

WIDE_FROM = 100
"""From this width the table also shows RSS and elapsed time."""


@dataclass(frozen=True)
class Column:
    """One table column: key, header, width and how a row becomes its cell."""

    key: str
    label: str
    width: int
    cell: Callable[[ProcessRow], Text]


def _right(text: str) -> Text:
    return Text(text, justify="right")


def _command(row: ProcessRow) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if row.container:
        text.append(f"[{visible(row.container)}] ", style="magenta")
    if row.job:
        text.append(f"{visible(row.job)} ", style="yellow")
    if row.task:
        text.append(f"{visible(row.task)}: ", style="bold cyan")
    text.append(fmt_text(row.command), style="" if row.command else "dim")
    return text


COLUMNS: tuple[Column, ...] = (
    Column("gpu", "GPU", 3, lambda r: _right(str(r.gpu_index))),
    Column("pid", "PID", 7, lambda r: _right(str(r.pid))),
    Column("user", "USER", 10, lambda r: Text(fmt_text(r.user), no_wrap=True)),
    Column("gpu_mem", "GPU MEM", 9, lambda r: _right(fmt_bytes(r.gpu_memory_bytes))),
    Column("cpu", "CPU%", 6, lambda r: _right(fmt_pct(r.cpu_pct))),
    Column("rss", "RSS", 9, lambda r: _right(fmt_bytes(r.rss_bytes))),
    Column("elapsed", "ELAPSED", 10, lambda r: _right(fmt_duration(r.elapsed_s))),
)
WIDE_ONLY = frozenset({"rss", "elapsed"})
CELL_CACHE_SIZE = 4096
"""Rendered cells kept (a 500-process table of 9 columns fits with its header)."""


class ProcessTable(DataTable[Text]):
    """Shows `rows` in the order given; touches only the cells that changed.

    Rows are never cleared per tick, so the cursor and scroll position survive updates.
    `clear(columns=True)` happens only when the width changes the column set.
    """

    rows_shown: reactive[tuple[ProcessRow, ...]] = reactive((), always_update=True)
    """Rows to show, already filtered and sorted."""

    def __init__(self, *, id: str | None = None) -> None:
        # before DataTable's own __init__, which clears its caches (`_clear_caches`)
        self._rendered_cells: dict[tuple[object, ...], tuple[Text, list[list[Segment]]]] = {}
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, ProcessRow] = {}
        self._order: list[str] = []
        self._layout: tuple[bool, int] | None = None

    def on_mount(self) -> None:
        """Build the columns for the width the table is about to get.

        The first `Resize` comes after the first frame is drawn; with the columns built only
        then, the rows the screen set at mount showed a frame later than the GPUs above them.
        """
        self._build_columns(self._expected_width())

    def on_resize(self, event: events.Resize) -> None:
        """Rebuild the columns when the width changes which ones fit."""
        self._build_columns(event.size.width)

    def _expected_width(self) -> int:
        # The table spans the screen less the borders and padding around it (true of every
        # layout in app.tcss); if that guess is wrong, the first Resize rebuilds the columns.
        width = self.app.size.width
        for node in self.ancestors:
            if isinstance(node, Widget):
                width -= node.styles.gutter.width
        return max(0, width)

    def watch_rows_shown(self, rows: tuple[ProcessRow, ...]) -> None:
        """Apply the new rows by key: remove gone ones, add new ones, update changed cells."""
        if self._layout is None:
            return
        cursor_key = self._cursor_key()
        update_rows(self, self._shown, rows, self._cells, same_row=operator.eq)
        order = [row.key for row in rows]
        if order != self._order:
            self._reorder(order)
        if cursor_key in self._shown:
            row_index = self.get_row_index(cursor_key)
            if row_index != self.cursor_row:  # moving it in place still scrolls and repaints
                self.move_cursor(row=row_index)

    def _columns(self) -> list[Column]:
        wide = self._layout is not None and self._layout[0]
        return [c for c in COLUMNS if wide or c.key not in WIDE_ONLY]

    def _cells(self, row: ProcessRow) -> list[tuple[str, Text]]:
        return [(column.key, column.cell(row)) for column in self._columns()] + [
            ("command", _command(row))
        ]

    def _reorder(self, order: list[str]) -> None:
        # DataTable.sort hands the key function cell values, not row keys; GPU and PID cells
        # together identify a row, so they map back to the wanted position.
        rank = {
            (str(self._shown[k].gpu_index), str(self._shown[k].pid)): i for i, k in enumerate(order)
        }
        self.sort("gpu", "pid", key=lambda cells: rank.get((cells[0].plain, cells[1].plain), 0))
        self._order = order

    def _cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key: RowKey = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except CellDoesNotExist:
            return None
        return key.value

    def _build_columns(self, width: int) -> None:
        wide = width >= WIDE_FROM
        fixed = sum(c.width + 2 for c in COLUMNS if wide or c.key not in WIDE_ONLY)
        command_w = max(8, width - fixed - 3)  # 2 for padding, 1 for the scrollbar
        if self._layout == (wide, command_w):
            return
        self._layout = (wide, command_w)
        self.clear(columns=True)
        for column in self._columns():
            self.add_column(column.label, key=column.key, width=column.width)
        self.add_column("COMMAND", key="command", width=command_w)
        self._shown, self._order = {}, []
        self.watch_rows_shown(self.rows_shown)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """DataTable's rendering of a cell, kept while the cell holds the same text.

        DataTable keys its own cell cache on a count that every `update_cell` raises, so one
        changed CPU % re-rendered every cell on screen, the header's included: about 2 ms a
        redraw of a one-process table, a fifth of the dashboard's frame. A cell's text is
        replaced only when it changed (`update_rows`), so the text object itself tells.
        """
        text = self._cell_text(row_index, column_index)
        if text is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (
            row_index,
            column_index,
            base_style,
            width,
            cursor,
            hover,
            getattr(self, "_show_hover_cursor", None),
            getattr(self, "_pseudo_class_state", None),
        )
        kept = self._rendered_cells.get(key)
        if kept is not None and kept[0] is text:
            return kept[1]
        lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if len(self._rendered_cells) >= CELL_CACHE_SIZE:
            self._rendered_cells.clear()
        self._rendered_cells[key] = (text, lines)
        return lines

    def _clear_caches(self) -> None:
        # DataTable clears its caches when what every cell looks like changed (the cursor
        # shown or not, the padding, the columns): these drawings go with them.
        self._rendered_cells.clear()
        super()._clear_caches()

    def _cell_text(self, row_index: int, column_index: int) -> Text | None:
        """The text a cell shows (a header's label for row -1), `None` if not found."""
        try:
            column_key = self._column_locations.get_key(column_index)
            row_key = None if row_index == -1 else self._row_locations.get_key(row_index)
        except AttributeError:  # DataTable's internals moved: render as DataTable does
            return None
        if column_key is None:
            return None
        if row_index == -1:
            column = self.columns.get(column_key)
            return None if column is None else column.label
        return None if row_key is None else self._data.get(row_key, {}).get(column_key)

    def current_row(self) -> ProcessRow | None:
        """The row under the cursor, if any."""
        key = self._cursor_key()
        return None if key is None else self._shown.get(key)


def visible_keys(table: ProcessTable) -> Sequence[str]:
    """Row keys in display order (for tests and the status line)."""
    return [
        table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value or ""
        for i in range(table.row_count)
    ]

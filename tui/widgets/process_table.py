"""The process table: a header, then one line per (GPU, process), with a row cursor.

A line-API widget rather than a `DataTable`: a `DataTable` drew every line of the table again
after any cell changed (its caches are keyed on a count each update raises). One CPU % moving
cost 24 ms a redraw on a 50-process table and 3 ms on a one-process table (2-core VM,
`benchmarks/bench_process_table.py`); profiled, the table took 11 % of the dashboard's UI
thread replaying a two-process session and 32 % with 32 processes. Here each row is built once
per change as a `Strip` of pre-styled segments, cached by the row's value, and while the same
number of processes stays on it only the lines whose row or cursor changed are refreshed: 1.3 ms
for either redraw, 2.7 % and 5.4 % of the UI thread (`benchmarks/RESULTS.md`); a process that
starts or exits changes the table's height, and the whole table is drawn again. The look is the
`DataTable`'s (the same component styles for the header, the zebra stripes and the cursor, the
same cell padding), without its hover highlight under the mouse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpuherd.present.format import fmt_bytes, fmt_duration, fmt_pct, fmt_text, visible
from tui.processes import ProcessRow
from tui.widgets.strip_cells import Cell, Column, last_column_width, padded, text_cell

WIDE_FROM = 100
"""From this width the table also shows RSS and elapsed time."""
WIDE_ONLY = frozenset({"rss", "elapsed"})
MAGENTA, YELLOW, BOLD_CYAN, DIM = (
    Style.parse(s) for s in ("magenta", "yellow", "bold cyan", "dim")
)


def _command(row: ProcessRow) -> Cell:
    # Container, job, task and command are other users' strings: `visible` shows escapes.
    out: Cell = []
    if row.container:
        out.append(Segment(f"[{visible(row.container)}] ", MAGENTA))
    if row.job:
        out.append(Segment(f"{visible(row.job)} ", YELLOW))
    if row.task:
        out.append(Segment(f"{visible(row.task)}: ", BOLD_CYAN))
    out.append(Segment(fmt_text(row.command), None if row.command else DIM))
    return out


COLUMNS: tuple[Column[ProcessRow], ...] = (
    Column("gpu", "GPU", 3, lambda r: text_cell(str(r.gpu_index)), right=True),
    Column("pid", "PID", 7, lambda r: text_cell(str(r.pid)), right=True),
    Column("user", "USER", 10, lambda r: text_cell(fmt_text(r.user))),
    Column("gpu_mem", "GPU MEM", 9, lambda r: text_cell(fmt_bytes(r.gpu_memory_bytes)), right=True),
    Column("cpu", "CPU%", 6, lambda r: text_cell(fmt_pct(r.cpu_pct)), right=True),
    Column("rss", "RSS", 9, lambda r: text_cell(fmt_bytes(r.rss_bytes)), right=True),
    Column("elapsed", "ELAPSED", 10, lambda r: text_cell(fmt_duration(r.elapsed_s)), right=True),
)
COMMAND: Column[ProcessRow] = Column("command", "COMMAND", 8, _command)
"""The last column; it takes the width the others leave (8 cells at least)."""

_ODD, _CURSOR = 1, 2
"""A drawn line's look: `_ODD` on every second row (the zebra stripes), `_CURSOR` on the
cursor's row."""


class ProcessTable(ScrollView, can_focus=True):
    """Shows `rows_shown` in the order given, with a row cursor that stays on its process.

    The cursor is kept by row key: when rows reorder, arrive or leave it stays on the same
    process, and when that process leaves it stays at the same place (the last row at most).
    Keys as a `DataTable` with a row cursor: up, down, page up and down, ctrl+home and ctrl+end
    (and home and end, which a `DataTable` spent scrolling sideways); a click moves the cursor.
    """

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home,home", "first", "Top", show=False),
        Binding("ctrl+end,end", "last", "Bottom", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "process-table--header",
        "process-table--even-row",
        "process-table--odd-row",
        "process-table--cursor",
    }
    """As `DataTable`'s `datatable--header`, `--even-row`, `--odd-row` and `--cursor`."""

    DEFAULT_CSS = """
    ProcessTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        overflow-x: hidden;
        &:focus {
            background-tint: $foreground 5%;
            & > .process-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .process-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .process-table--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .process-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .process-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .process-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .process-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    # No repaint on assignment: the watchers refresh only the lines that changed.
    rows_shown: reactive[tuple[ProcessRow, ...]] = reactive((), always_update=True, repaint=False)
    """Rows to show, already filtered and sorted."""
    show_cursor: reactive[bool] = reactive(True, repaint=False)
    """Whether the cursor's row is drawn highlighted."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: tuple[ProcessRow, ...] = ()
        self._index: dict[str, int] = {}
        self._cursor = 0
        self._cursor_key: str | None = None
        self._width = -1
        self._columns: tuple[Column[ProcessRow], ...] = ()
        self._line_cells = 0
        self._looks: tuple[Style, ...] | None = None
        """Styles of the header, the even and odd rows and the cursor, as drawn now."""
        self._header: Strip | None = None
        self._content: dict[str, tuple[ProcessRow, Cell]] = {}
        """Row key -> (row, its padded cells without the line's style)."""
        self._strips: dict[str, tuple[ProcessRow, int, Strip]] = {}
        """Row key -> (row, look, its line as drawn)."""

    # -- rows and cursor

    def watch_rows_shown(self, rows: tuple[ProcessRow, ...]) -> None:
        """Take the new rows; refresh only the lines that now show another row or look."""
        old_rows, old_cursor = self._rows, self._cursor
        self._rows = rows
        self._index = {row.key: i for i, row in enumerate(rows)}
        kept = self._index.get(self._cursor_key) if self._cursor_key is not None else None
        self._cursor = kept if kept is not None else max(0, min(old_cursor, len(rows) - 1))
        self._cursor_key = rows[self._cursor].key if rows else None
        if len(self._content) > len(rows) or len(self._strips) > len(rows):
            self._forget_gone()
        height = len(rows) + 1
        if self.virtual_size.height != height:
            # A relayout (the table is as tall as its rows), which draws every line again.
            self.virtual_size = Size(0, height)
        else:
            self._refresh_changed(old_rows)
        if self._cursor != old_cursor:
            self.call_after_refresh(self._scroll_to_cursor)

    def _forget_gone(self) -> None:
        index = self._index
        self._content = {k: v for k, v in self._content.items() if k in index}
        self._strips = {k: v for k, v in self._strips.items() if k in index}

    def _refresh_changed(self, old_rows: Sequence[ProcessRow]) -> None:
        # As many rows as before: a line whose row is the same one, unchanged, looks the same
        # (the cursor follows its row's key, so a cursor that moved sits on rows that changed).
        top, lines = self.scroll_offset.y, self.size.height - 1
        rows = self._rows
        for index in range(top, min(top + lines, len(rows))):
            if old_rows[index] != rows[index]:
                self.refresh(Region(0, index - top + 1, self.size.width, 1))

    def watch_show_cursor(self) -> None:
        """Draw the cursor's row again, highlighted or not."""
        self._refresh_row(self._cursor)

    @property
    def row_count(self) -> int:
        """How many rows the table holds (scrolled into view or not)."""
        return len(self._rows)

    @property
    def cursor_row(self) -> int:
        """The index of the cursor's row (0 when the table is empty)."""
        return self._cursor

    def move_cursor(self, row: int) -> None:
        """Put the cursor on row `row` (kept within the rows) and scroll it into view."""
        if not self._rows:
            return
        old, self._cursor = self._cursor, max(0, min(row, len(self._rows) - 1))
        self._cursor_key = self._rows[self._cursor].key
        if old != self._cursor:
            self._refresh_row(old)
            self._refresh_row(self._cursor)
        self._scroll_to_cursor()

    def current_row(self) -> ProcessRow | None:
        """The row under the cursor, if any."""
        return self._rows[self._cursor] if self._rows else None

    def _refresh_row(self, index: int) -> None:
        line = index - self.scroll_offset.y + 1
        if 1 <= line < self.size.height:
            self.refresh(Region(0, line, self.size.width, 1))

    def _scroll_to_cursor(self) -> None:
        top, lines = self.scroll_offset.y, max(1, self.size.height - 1)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True)
        elif self._cursor >= top + lines:
            self.scroll_to(y=self._cursor - lines + 1, animate=False, force=True)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.move_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        """One row down."""
        self.move_cursor(self._cursor + 1)

    def action_page_up(self) -> None:
        """A screenful up, the rows scrolled with the cursor."""
        page = max(1, self.size.height - 1)
        self.scroll_to(y=self.scroll_offset.y - page, animate=False, force=True)
        self.move_cursor(self._cursor - page)

    def action_page_down(self) -> None:
        """A screenful down, the rows scrolled with the cursor."""
        page = max(1, self.size.height - 1)
        self.scroll_to(y=self.scroll_offset.y + page, animate=False, force=True)
        self.move_cursor(self._cursor + page)

    def action_first(self) -> None:
        """The first row."""
        self.move_cursor(0)

    def action_last(self) -> None:
        """The last row."""
        self.move_cursor(len(self._rows) - 1)

    def on_click(self, event: events.Click) -> None:
        """A click on a row puts the cursor on it."""
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            index = self.scroll_offset.y + offset.y - 1
            if index < len(self._rows):
                self.move_cursor(index)

    # -- drawing

    def notify_style_update(self) -> None:
        """A new theme, focus or class: the lines are styled again when next drawn."""
        super().notify_style_update()
        self._looks = None

    def render_lines(self, crop: Region) -> list[Strip]:
        """Lay the columns out for the width, take the styles, then draw the lines asked for."""
        # At draw time, not on `Resize`: Textual sends the first `Resize` after the first frame,
        # and the rows the screen set at mount must be in that frame, in their columns.
        self._prepare(self.size.width)
        return super().render_lines(crop)

    def _prepare(self, width: int) -> None:
        if width != self._width:
            self._layout(width)
        if self._looks is None:
            # The same component styles a `DataTable` draws its header, stripes and cursor with.
            self._looks = (
                self.get_component_styles("process-table--header").rich_style,
                self.get_component_styles("process-table--even-row").rich_style,
                self.get_component_styles("process-table--odd-row").rich_style,
                self.get_component_rich_style("process-table--cursor"),
            )
            self._header = None
            self._strips.clear()

    def _layout(self, width: int) -> None:
        wide = width >= WIDE_FROM
        columns = [c for c in COLUMNS if wide or c.key not in WIDE_ONLY]
        command_w = last_column_width([c.width for c in columns], COMMAND.width, width)
        self._width = width
        self._columns = (*columns, replace(COMMAND, width=command_w))
        self._line_cells = sum(c.width + 2 for c in self._columns)  # `_styled` adds the blank
        self._header = None
        self._content.clear()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        """Line `y` of the widget: the header, or the row scrolled to it."""
        self._prepare(self.size.width)
        assert self._looks is not None
        if y == 0:
            if self._header is None:
                self._header = self._styled(self._header_cells(), self._looks[0], None)
            return self._header
        index = self.scroll_offset.y + y - 1
        if not 0 <= index < len(self._rows):
            return Strip.blank(self.size.width, self.rich_style)
        row = self._rows[index]
        look = (index % 2) | (_CURSOR if index == self._cursor and self.show_cursor else 0)
        drawn = self._strips.get(row.key)
        if drawn is None or drawn[1] != look or drawn[0] != row:
            drawn = (row, look, self._row_strip(row, look))
            self._strips[row.key] = drawn
        return drawn[2]

    @property
    def _widths(self) -> list[int]:
        return [c.width for c in self._columns]

    def _header_cells(self) -> Cell:
        return padded([(text_cell(c.label), False) for c in self._columns], self._widths)

    def _row_cells(self, row: ProcessRow) -> Cell:
        return padded([(c.cell(row), c.right) for c in self._columns], self._widths)

    def _row_strip(self, row: ProcessRow, look: int) -> Strip:
        content = self._content.get(row.key)
        if content is None or content[0] != row:
            # Runs of one style merged once here, so each look of the row styles a few segments.
            content = (row, list(Segment.simplify(self._row_cells(row))))
            self._content[row.key] = content
        assert self._looks is not None
        stripe = self._looks[1 + (look & _ODD)]
        if not look & _CURSOR:
            return self._styled(content[1], stripe, None)
        cursor = self._looks[3]
        # A `DataTable`'s cursor colours win over the cells' own (its `cursor_*_priority`).
        return self._styled(
            content[1],
            stripe + cursor,
            Style.from_color(cursor.color) + Style.from_color(bgcolor=cursor.bgcolor),
        )

    def _styled(self, content: Cell, style: Style, post: Style | None) -> Strip:
        """`content` under `style` (and over `post`), its blank end as wide as the widget."""
        width = self.size.width
        segments = list(Segment.apply_style(content, style, post))
        if width > self._line_cells:
            segments.append(Segment(" " * (width - self._line_cells), style))
        strip = Strip(segments, max(width, self._line_cells))
        return strip if width >= self._line_cells else strip.crop(0, width)

    # -- reading it back (tests)

    def shown_columns(self) -> tuple[Column[ProcessRow], ...]:
        """The columns as last laid out, COMMAND last with the width it was given.

        Read only: after a resize they change when the table is next drawn, as on screen.
        """
        return self._columns

    def cell_texts(self, key: str) -> dict[str, str]:
        """Row `key`'s cells by column key, in the order shown: their plain text, uncut."""
        row = self._rows[self._index[key]]
        return {c.key: "".join(s.text for s in c.cell(row)) for c in self.shown_columns()}

    def lines(self) -> list[str]:
        """The header and every row as plain text, as wide as laid out (the blank end cut)."""
        drawn = [self._header_cells(), *(self._row_cells(row) for row in self._rows)]
        return ["".join(s.text for s in line).rstrip() for line in drawn]


def visible_keys(table: ProcessTable) -> Sequence[str]:
    """Row keys in display order (for tests)."""
    return [row.key for row in table.rows_shown]

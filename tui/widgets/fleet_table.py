"""The fleet table: one line per host and GPU, most free memory first, stale hosts last.

A line-API widget rather than a `DataTable`: a fleet refreshes every row every second (memory
moves everywhere, and so does the order), and a `DataTable` re-rendered every cell of every row
through Rich on each refresh, 20 % of a core for 75 GPUs on a 2-core machine. Here each row is
built once per change as a `Strip` of plain segments (fixed-width text, pre-parsed styles), cached
by the row's value, and only lines whose row changed are refreshed on screen.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpuherd.fleet.model import FleetRow, FleetTask
from gpuherd.present.format import fmt_bytes, fmt_gib_pair, fmt_pct, pct_of, visible
from tui.tasks import BADGES, SEVERITY_STYLE, STATUS_STYLE
from tui.text import level_style
from tui.widgets.strip_cells import Cell, Column, last_column_width, padded, text_cell

S = Style.parse
DIM, BOLD_RED, CYAN, GREEN, HEADER = S("dim"), S("bold red"), S("cyan"), S("green"), S("bold")
INVALID = "invalid"
"""Shown for a figure no GPU can have (`FleetRow.invalid`): it is not a number to read."""
BAR_CELLS = 10
WIDE_FROM = 150
"""Narrower than this, the model column gives its room to the tasks."""


def _host(row: FleetRow) -> Cell:
    host = visible(row.host)  # labels are whatever an exporter sent
    if row.stale:
        return [Segment(host), Segment(" stale", BOLD_RED)]
    if row.source == "dcgm":
        return [Segment(host), Segment(" dcgm", CYAN)]
    return text_cell(host)


def _invalid(row: FleetRow, figure: str, text: str) -> Cell:
    return text_cell(INVALID, BOLD_RED) if figure in row.invalid else text_cell(text)


def _memory(row: FleetRow) -> Cell:
    if "memory" in row.invalid:
        return [Segment("[" + "?" * BAR_CELLS + "]", DIM), Segment(" "), Segment(INVALID, BOLD_RED)]
    pct = pct_of(row.used_bytes, row.total_bytes)
    if pct is None:
        bar = [Segment("[" + "?" * BAR_CELLS + "]", DIM)]
    else:
        filled = round(BAR_CELLS * min(max(pct, 0.0), 100.0) / 100.0)
        style = DIM if row.stale else S(level_style(pct))
        bar = [
            Segment("["),
            Segment("█" * filled, style),
            Segment("░" * (BAR_CELLS - filled), DIM),
            Segment("]"),
        ]
    return [*bar, Segment(" " + fmt_gib_pair(row.used_bytes, row.total_bytes))]


def _user(row: FleetRow) -> Cell:
    if row.top_user is None:
        return text_cell("-", DIM)
    if "user" in row.invalid:
        return [Segment(f"{visible(row.top_user)} "), Segment(INVALID, BOLD_RED)]
    return text_cell(f"{visible(row.top_user)} {fmt_bytes(row.top_user_bytes)}")


def _task(task: FleetTask) -> Cell:
    out = [Segment(visible(task.name), S(STATUS_STYLE.get(task.status or "", "")))]
    for kind in task.findings[:2]:
        out.append(
            Segment(
                f" {visible(BADGES.get(kind, kind))}",
                S(SEVERITY_STYLE.get(task.severity or "", "")),
            )
        )
    if not task.findings and task.status == "running":
        out.append(Segment(" ok", GREEN))
    return out


def _tasks(row: FleetRow) -> Cell:
    out: Cell = []
    for i, task in enumerate(row.tasks):
        if i:
            out.append(Segment(", "))
        out.extend(_task(task))
    return out


COLUMNS: tuple[Column[FleetRow], ...] = (
    Column("host", "HOST", 18, _host),
    Column("gpu", "GPU", 3, lambda r: text_cell(visible(r.gpu)), right=True),
    Column("model", "MODEL", 22, lambda r: text_cell(visible(r.model or ""))),
    Column("memory", "MEMORY", 30, _memory),
    Column("free", "FREE", 9, lambda r: _invalid(r, "memory", fmt_bytes(r.free_bytes)), right=True),
    Column(
        "util",
        "UTIL",
        7,
        lambda r: _invalid(
            r, "util", fmt_pct(None if r.util_ratio is None else 100 * r.util_ratio)
        ),
        right=True,
    ),
    Column("user", "TOP USER", 16, _user),
)
TASKS: Column[FleetRow] = Column("tasks", "TASKS", 16, _tasks)


class FleetTable(ScrollView, can_focus=True):
    """A header line, then one line per row in the order given; scrolls with the keys."""

    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[FleetRow] = []
        self._strips: dict[str, tuple[FleetRow, Strip]] = {}
        self._columns: list[Column[FleetRow]] = list(COLUMNS)
        self._widths: list[int] = []
        self._header = Strip([])
        self._line_cells = 0

    def on_resize(self, event: events.Resize) -> None:
        """Lay the columns out for the width; the tasks take what is left."""
        self._layout(event.size.width)
        self._strips.clear()
        self.refresh()

    def _layout(self, width: int) -> None:
        self._columns = [c for c in COLUMNS if width >= WIDE_FROM or c.key != "model"]
        widths = [c.width for c in self._columns]
        self._widths = [*widths, last_column_width(widths, TASKS.width, width)]
        self._line_cells = 1 + sum(w + 2 for w in self._widths)  # `_line` adds the blank
        self._header = self._line(
            [(text_cell(c.label, HEADER), c.right) for c in (*self._columns, TASKS)]
        )

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Show `rows` (already sorted); only the lines whose row changed are redrawn."""
        old = [row.key for row in self._rows]
        self._rows = list(rows)
        self.virtual_size = Size(self.size.width, len(self._rows) + 1)
        if [row.key for row in self._rows] != old:
            self.refresh()
            return
        top, height = self.scroll_offset.y, self.size.height
        for index, row in enumerate(self._rows):
            line = index - top + 1
            cached = self._strips.get(row.key)
            if 1 <= line < height and (cached is None or cached[0] != row):
                self.refresh(Region(0, line, self.size.width, 1))

    def render_line(self, y: int) -> Strip:
        """Line `y` of the widget: the header, or the row scrolled to it."""
        width = self.size.width
        if not self._widths:
            self._layout(width)
        if y == 0:
            return self._fit_width(self._header, width)
        index = self.scroll_offset.y + y - 1
        if not 0 <= index < len(self._rows):
            return Strip.blank(width)
        row = self._rows[index]
        cached = self._strips.get(row.key)
        if cached is None or cached[0] != row:
            cached = (row, self._fit_width(self._row_strip(row), width))
            self._strips[row.key] = cached
        return cached[1]

    def _fit_width(self, strip: Strip, width: int) -> Strip:
        # Lines are laid out to the width already; only a terminal narrower than the columns'
        # minimum needs a crop.
        return strip if self._line_cells == width else strip.crop_extend(0, width, None)

    def _row_strip(self, row: FleetRow) -> Strip:
        if not self._widths:  # drawn before the first resize
            self._layout(self.size.width)
        strip = self._line([(c.cell(row), c.right) for c in (*self._columns, TASKS)])
        return strip.apply_style(DIM) if row.stale else strip

    def _line(self, cells: list[tuple[Cell, bool]]) -> Strip:
        # a blank cell more at the end than a DataTable's padding: `_layout` counts it
        return Strip([*padded(cells, self._widths), Segment(" ")], self._line_cells)

    def lines(self) -> list[str]:
        """Every row as plain text, in display order (for tests)."""
        return [self._row_strip(row).text.rstrip() for row in self._rows]

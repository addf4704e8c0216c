"""The containers panel: one row per running container, keyed by container id, sortable."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from collectors.machine.container_gpu import ContainerGpuUse, gpu_use_by_container
from collectors.roles import CONTAINERS, GPU
from gpuherd.present.format import NA, fmt_bytes, fmt_pct, fmt_text, fmt_uptime
from tui.containers import (
    CONTAINER_SORTS,
    ContainerRow,
    ContainerSort,
    build_container_rows,
    first_tick,
    next_container_sort,
    sort_containers,
)
from tui.widgets.keyed_table import update_rows
from tui.widgets.panel import SidePanel

if TYPE_CHECKING:
    from tui.state import MonitorState

WIDE_FROM = 148
"""From this width the panel also shows image, uptime and the I/O rates."""
DROP_ORDER = ("pids", "cpu", "status", "memory")
"""Narrower than the narrow columns, these go first (a table wider than its panel would scroll
sideways and draw a scrollbar across its last row)."""
CELL_PADDING = 2
"""A DataTable cell's padding, one on each side."""
SCROLLBAR = 1
"""The vertical scrollbar's width (`scrollbar-size-vertical`), kept free even when hidden."""


def _right(text: str) -> Text:
    return Text(text, justify="right")


def _as_shown(row: ContainerRow) -> tuple[ContainerRow, str]:
    """`row` with its uptime as the cell shows it: rows that draw alike compare equal."""
    return replace(row, uptime_s=None), fmt_uptime(row.uptime_s)


def _same_shown(old: ContainerRow, new: ContainerRow) -> bool:
    """Whether `new` draws as `old` did: the clock moved but no cell did (no cell is built)."""
    return old == new or _as_shown(old) == _as_shown(new)


def _pair(left: float | None, right: float | None) -> str:
    """`used / limit` or `in / out`; a single `N/A` when neither is known (no network)."""
    if left is None and right is None:
        return NA
    return f"{fmt_bytes(left)} / {fmt_bytes(right)}"


@dataclass(frozen=True)
class Column:
    """One panel column: key, header, width and how a row becomes its cell."""

    key: str
    label: str
    width: int
    cell: Callable[[ContainerRow], Text]
    wide_only: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("name", "NAME", 16, lambda r: Text(r.name, no_wrap=True, overflow="ellipsis")),
    Column(
        "image",
        "IMAGE",
        14,
        lambda r: Text(fmt_text(r.image), no_wrap=True, overflow="ellipsis"),
        wide_only=True,
    ),
    Column("status", "STATUS", 8, lambda r: Text(r.status)),
    Column("uptime", "UP", 8, lambda r: _right(fmt_uptime(r.uptime_s)), wide_only=True),
    Column("cpu", "CPU%", 6, lambda r: _right(fmt_pct(r.cpu_pct))),
    Column(
        "memory",
        "MEM / LIMIT",
        19,
        lambda r: _right(_pair(r.memory_used_bytes, r.memory_limit_bytes)),
    ),
    Column(
        "net",
        "NET IN/OUT /s",
        17,
        lambda r: _right(_pair(r.net_rx_bytes_per_s, r.net_tx_bytes_per_s)),
        wide_only=True,
    ),
    Column(
        "block",
        "BLOCK R/W /s",
        17,
        lambda r: _right(_pair(r.block_read_bytes_per_s, r.block_write_bytes_per_s)),
        wide_only=True,
    ),
    Column("pids", "PIDS", 5, lambda r: _right(NA if r.pids is None else str(r.pids))),
    Column("gpus", "GPUS", 6, lambda r: Text(r.gpus or "-", no_wrap=True, overflow="ellipsis")),
    Column(
        "gpu_mem",
        "GPU MEM",
        9,
        lambda r: _right("-" if r.gpu_memory_bytes is None else fmt_bytes(r.gpu_memory_bytes)),
    ),
)


class ContainerPanel(DataTable[Text], SidePanel):
    """Shows `container_rows` in the chosen order; touches only the cells that changed.

    `s` cycles the sort key and `r` reverses it; Enter posts `ContainerPanel.Selected`, which
    the screen turns into a filter of the process table. Shown while an engine answers (or
    fails after answering).
    """

    ROLES = frozenset({GPU, CONTAINERS})
    HEALTH_ROLE = CONTAINERS

    DEFAULT_CSS = """
    ContainerPanel {
        height: auto;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    """

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort containers"),
        Binding("r", "reverse_sort", "Reverse"),
    ]

    container_rows: reactive[tuple[ContainerRow, ...]] = reactive(
        (), always_update=True, repaint=False
    )
    """The rows to show, in any order: the panel sorts them. Setting it repaints nothing by
    itself: only the cells, title and order that changed do (each repaints the whole table)."""
    sort_key: reactive[ContainerSort] = reactive(CONTAINER_SORTS[0])
    reverse: reactive[bool] = reactive(False)

    @dataclass
    class Selected(Message):
        """The person chose a container: filter the processes to it."""

        short_id: str
        name: str

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, ContainerRow] = {}
        self._order: list[str] = []
        self._columns: tuple[Column, ...] | None = None
        """The columns shown, fitted to the panel's width; `None` until it has one."""
        self._title = ""
        self._drawn: tuple[object, dict[str, ContainerGpuUse]] = (None, {})
        """The container tick on the panel and its containers' GPU use when it was drawn."""

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """New containers' stats; on a GPU tick only if their GPU memory or processes moved.

        Uptimes and stats advance with the engine's own ticks.
        """
        ticks = state.samples(CONTAINERS)
        shown = bool(ticks or state.problems(CONTAINERS))
        if shown != self.has_class("-shown"):
            self.set_class(shown, "-shown")
            self.screen.refresh_bindings()  # `c` appears in the footer with the panel
        latest = first_tick(ticks)
        use = (
            gpu_use_by_container(
                state.gpu_tick, state.host_sample.processes if state.host_sample else ()
            )
            if latest
            else {}
        )
        if changed != CONTAINERS and self._drawn == (latest, use):
            return
        self._drawn = (latest, use)
        self.container_rows = tuple(
            build_container_rows(latest, state.gpu_tick, state.host_sample, state.now)
        )

    def on_resize(self, event: events.Resize) -> None:
        """Rebuild the columns when the width changes which ones fit."""
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        columns = fitting_columns(width)
        if columns == self._columns:
            return
        self._columns = columns
        self.clear(columns=True)
        for column in columns:
            self.add_column(column.label, key=column.key, width=column.width)
        self._shown, self._order = {}, []
        self._apply()

    def _cells(self, row: ContainerRow) -> list[tuple[str, Text]]:
        return [(column.key, column.cell(row)) for column in self._columns or ()]

    def watch_container_rows(self) -> None:
        """New stats: update by key."""
        self._apply()

    def watch_sort_key(self) -> None:
        """Re-sort at once."""
        self._apply()

    def watch_reverse(self) -> None:
        """Re-sort at once."""
        self._apply()

    def shown_rows(self) -> list[ContainerRow]:
        """The rows in display order."""
        return sort_containers(self.container_rows, self.sort_key, self.reverse)

    def body_lines(self) -> int:
        """The header and a line a container."""
        return 1 + len(self.container_rows)

    def _apply(self) -> None:
        rows = self.shown_rows()
        self._set_title(len(rows))
        if self._columns is None:
            # No columns yet: as in the tasks panel, a panel that got its width while empty
            # may see no further resize, so the first rows lay the columns out.
            if self.size.width:
                self._fit(self.size.width)
            return
        cursor = self._cursor_key()
        update_rows(self, self._shown, rows, self._cells, same_row=_same_shown)
        order = [row.key for row in rows]
        if order != self._order:
            # DataTable.sort hands the key function cell values; the name cell is unique.
            rank = {self._shown[k].name: i for i, k in enumerate(order)}
            self.sort("name", key=lambda cell: rank.get(cell.plain, 0))
            self._order = order
        if cursor in self._shown:
            self.move_cursor(row=self.get_row_index(cursor))

    def _set_title(self, count: int) -> None:
        arrow = "▼" if self.sort_key.descending != self.reverse else "▲"
        title = (
            f"Containers ({count})  sort: {self.sort_key.label} {arrow} (s, r)  "
            "Enter: its processes"
        )
        if title != self._title:
            # Assigning a border title repaints the panel even when the text is the same.
            self._title = title
            self.border_title = title

    def _cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def action_cycle_sort(self) -> None:
        """Next sort key, in its default direction."""
        self.reverse = False
        self.sort_key = next_container_sort(self.sort_key)

    def action_reverse_sort(self) -> None:
        """Flip the order."""
        self.reverse = not self.reverse

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: filter the processes to that container."""
        event.stop()
        row = self._shown.get(event.row_key.value or "")
        if row is not None:
            self.post_message(self.Selected(row.short_id, row.name))


def fitting_columns(width: int) -> tuple[Column, ...]:
    """The columns shown at `width` cells, never wider than that.

    The wide ones from `WIDE_FROM`, then as many of the narrow ones as fit, `DROP_ORDER` going
    first (the name and GPU columns always stay).
    """
    columns = [c for c in COLUMNS if width >= WIDE_FROM or not c.wide_only]
    for key in (None, *DROP_ORDER):
        columns = [c for c in columns if c.key != key]
        if sum(c.width + CELL_PADDING for c in columns) <= width - SCROLLBAR:
            break
    return tuple(columns)


def visible_names(panel: ContainerPanel) -> Sequence[str]:
    """Container names in display order (for tests)."""
    return [panel.get_cell_at(Coordinate(i, 0)).plain for i in range(panel.row_count)]

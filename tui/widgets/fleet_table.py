"""The fleet table: one row per host and GPU, most free memory first, stale hosts last."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from gpuherd.fleet.model import FleetRow, FleetTask
from gpuherd.format import fmt_bytes, fmt_gib_pair, fmt_pct, pct_of
from tui.tasks import BADGES, SEVERITY_STYLE, STATUS_STYLE
from tui.text import bar
from tui.widgets.keyed_table import update_rows


@dataclass(frozen=True)
class Column:
    """One column: key, header, width and how a row becomes its cell."""

    key: str
    label: str
    width: int
    cell: Callable[[FleetRow], Text]


def _right(text: str, style: str = "") -> Text:
    return Text(text, justify="right", style=style)


def _host(row: FleetRow) -> Text:
    text = Text(row.host, no_wrap=True, overflow="ellipsis")
    if row.stale:
        text.append(" stale", style="bold red")
    elif row.source == "dcgm":
        text.append(" dcgm", style="cyan")
    return text


def _memory(row: FleetRow) -> Text:
    pct = pct_of(row.used_bytes, row.total_bytes)
    return Text.assemble(bar(pct, 12, "dim" if row.stale else None), " ",
                         fmt_gib_pair(row.used_bytes, row.total_bytes))


def _user(row: FleetRow) -> Text:
    if row.top_user is None:
        return Text("-", style="dim")
    return Text(f"{row.top_user} {fmt_bytes(row.top_user_bytes)}", no_wrap=True,
                overflow="ellipsis")


def _task(task: FleetTask) -> Text:
    text = Text(task.name, style=STATUS_STYLE.get(task.status or "", ""))
    for kind in task.findings[:2]:
        text.append(f" {BADGES.get(kind, kind)}",
                    style=SEVERITY_STYLE.get(task.severity or "", ""))
    if not task.findings and task.status == "running":
        text.append(" ok", style="green")
    return text


def _tasks(row: FleetRow) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, task in enumerate(row.tasks):
        if i:
            out.append(", ")
        out.append_text(_task(task))
    return out


COLUMNS: tuple[Column, ...] = (
    Column("host", "HOST", 22, _host),
    Column("gpu", "GPU", 3, lambda r: _right(r.gpu)),
    Column("model", "MODEL", 22, lambda r: Text(r.model or "", no_wrap=True,
                                                overflow="ellipsis")),
    Column("memory", "MEMORY", 30, _memory),
    Column("free", "FREE", 9, lambda r: _right(fmt_bytes(r.free_bytes))),
    Column("util", "UTIL", 5, lambda r: _right(fmt_pct(None if r.util_ratio is None
                                                       else 100 * r.util_ratio))),
    Column("user", "TOP USER", 18, _user),
)

WIDE_FROM = 150
"""Narrower than this, the model column gives its room to the tasks."""
WIDE_ONLY = frozenset({"model"})


class FleetTable(DataTable[Text]):
    """Shows the rows in the order given; touches only the cells that changed."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, FleetRow] = {}
        self._order: list[str] = []
        self._rows: Sequence[FleetRow] = ()
        self._width: int | None = None
        self._columns = list(COLUMNS)

    def on_resize(self, event: events.Resize) -> None:
        """The tasks column takes what the others leave."""
        width = event.size.width
        if width == self._width:
            return
        self._width = width
        self._columns = [c for c in COLUMNS if width >= WIDE_FROM or c.key not in WIDE_ONLY]
        self.clear(columns=True)
        for column in self._columns:
            self.add_column(column.label, key=column.key, width=column.width)
        fixed = sum(c.width + 2 for c in self._columns)
        self.add_column("TASKS", key="tasks", width=max(16, width - fixed - 3))
        self._shown, self._order = {}, []
        self.show(self._rows)

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Bring the table in step with `rows` (already sorted)."""
        self._rows = rows
        if self._width is None:
            return  # the columns come with the first resize
        update_rows(self, self._shown, rows, self._cells)
        order = [row.key for row in rows]
        if order != self._order:
            rank = {(r.host, r.gpu, r.stale): i for i, r in enumerate(rows)}
            self.sort("host", "gpu", key=lambda cells: rank.get(_identity(cells), 0))
            self._order = order

    def _cells(self, row: FleetRow) -> list[tuple[str, Text]]:
        cells = [(column.key, column.cell(row)) for column in self._columns]
        if row.stale:
            for _, text in cells:
                text.stylize("dim")
        return [*cells, ("tasks", _tasks(row))]

    @property
    def shown_keys(self) -> list[str]:
        """Row keys in display order (for tests)."""
        return list(self._order)


def _identity(cells: tuple[Text, Text]) -> tuple[str, str, bool]:
    host = cells[0].plain
    stale = host.endswith(" stale")
    host = host.removesuffix(" stale").removesuffix(" dcgm")
    return (host, cells[1].plain, stale)

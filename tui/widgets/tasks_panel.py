"""The tasks table: one row per followed training log, keyed by task id, updated cell by cell."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from tui.tasks import TaskRow
from tui.widgets.keyed_table import update_rows

MIN_HEALTH = 22
"""The health column keeps at least this width; optional columns go first."""


@dataclass(frozen=True)
class TaskColumn:
    """One column: key, header and width."""

    key: str
    label: str
    width: int


COLUMNS = (
    TaskColumn("task", "TASK", 22),
    TaskColumn("status", "STATUS", 7),
    TaskColumn("progress", "PROGRESS", 18),
    TaskColumn("loss", "LOSS", 8),
    TaskColumn("val", "VAL", 12),
    TaskColumn("speed", "SPEED", 12),
    TaskColumn("eta", "ETA", 8),
    TaskColumn("gpu", "GPU", 7),
)
DROP_ORDER = ("eta", "gpu", "speed", "val", "progress")
"""Columns left out, in this order, while the health column would be narrower than
`MIN_HEALTH`."""


def fitting_columns(width: int) -> tuple[tuple[TaskColumn, ...], int]:
    """The columns that fit `width` cells, and the width left for the health column."""
    dropped: set[str] = set()
    for key in (None, *DROP_ORDER):
        if key is not None:
            dropped.add(key)
        shown = tuple(c for c in COLUMNS if c.key not in dropped)
        health = width - sum(c.width + 2 for c in shown) - 3  # padding, scrollbar
        if health >= MIN_HEALTH:
            break
    return shown, max(10, health)


class TasksPanel(DataTable[Text]):
    """Shows `task_rows`; never cleared per update, so the cursor and scroll position survive.

    Enter (or a click on the highlighted row) posts `TasksPanel.Opened` for that task.
    """

    DEFAULT_CSS = """
    TasksPanel {
        height: auto;
        max-height: 100%;
        scrollbar-size-vertical: 1;
    }
    """

    task_rows: reactive[tuple[TaskRow, ...]] = reactive((), always_update=True)
    """The rows to show, in order."""

    @dataclass
    class Opened(Message):
        """The person asked for the details of a task."""

        task_id: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, TaskRow] = {}
        self._layout: tuple[tuple[TaskColumn, ...], int] | None = None

    def on_resize(self, event: events.Resize) -> None:
        """Rebuild the columns when the width changes which ones fit."""
        self._build_columns(event.size.width)

    def watch_task_rows(self, rows: tuple[TaskRow, ...]) -> None:
        """Remove gone rows, add new ones, update the cells that changed."""
        if self._layout is None:
            return
        keys = self._keys()
        # No `same_row`: Text equality misses a change of base style (a label turning red).
        update_rows(self, self._shown, rows, lambda row: [(k, row.cell(k)) for k in keys])

    def _keys(self) -> list[str]:
        shown = self._layout[0] if self._layout is not None else ()
        return [c.key for c in shown] + ["health"]

    def _build_columns(self, width: int) -> None:
        layout = fitting_columns(width)
        if self._layout == layout:
            return
        self._layout = layout
        self.clear(columns=True)
        for column in layout[0]:
            self.add_column(column.label, key=column.key, width=column.width)
        self.add_column("HEALTH", key="health", width=layout[1])
        self._shown = {}
        self.watch_task_rows(self.task_rows)

    def current_task(self) -> str | None:
        """The task under the cursor, if any."""
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except CellDoesNotExist:
            return None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: ask for its details."""
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Opened(event.row_key.value))

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

WIDE_FROM = 110
"""From this width the table also shows ETA and the GPU."""


@dataclass(frozen=True)
class TaskColumn:
    """One column: key, header and width."""

    key: str
    label: str
    width: int


COLUMNS = (
    TaskColumn("task", "TASK", 22),
    TaskColumn("status", "STATUS", 7),
    TaskColumn("progress", "PROGRESS", 19),
    TaskColumn("loss", "LOSS", 8),
    TaskColumn("val", "VAL", 12),
    TaskColumn("speed", "SPEED", 13),
    TaskColumn("eta", "ETA", 8),
    TaskColumn("gpu", "GPU", 7),
)
WIDE_ONLY = frozenset({"eta", "gpu"})


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
        self._layout: tuple[bool, int] | None = None

    def on_resize(self, event: events.Resize) -> None:
        """Rebuild the columns when the width changes which ones fit."""
        self._build_columns(event.size.width)

    def watch_task_rows(self, rows: tuple[TaskRow, ...]) -> None:
        """Remove gone rows, add new ones, update the cells that changed."""
        if self._layout is None:
            return
        wanted = {row.key: row for row in rows}
        for key in [k for k in self._shown if k not in wanted]:
            self.remove_row(key)
            del self._shown[key]
        keys = self._keys()
        for row in rows:
            old = self._shown.get(row.key)
            if old is None:
                self.add_row(*(row.cell(k) for k in keys), key=row.key)
            elif old != row:
                for key in keys:
                    cell = row.cell(key)
                    if cell != old.cell(key):
                        self.update_cell(row.key, key, cell)
            self._shown[row.key] = row

    def _keys(self) -> list[str]:
        wide = self._layout is not None and self._layout[0]
        return [c.key for c in COLUMNS if wide or c.key not in WIDE_ONLY] + ["health"]

    def _build_columns(self, width: int) -> None:
        wide = width >= WIDE_FROM
        fixed = sum(c.width + 2 for c in COLUMNS if wide or c.key not in WIDE_ONLY)
        health_w = max(10, width - fixed - 3)  # 2 for padding, 1 for the scrollbar
        if self._layout == (wide, health_w):
            return
        self._layout = (wide, health_w)
        self.clear(columns=True)
        for column in COLUMNS:
            if wide or column.key not in WIDE_ONLY:
                self.add_column(column.label, key=column.key, width=column.width)
        self.add_column("HEALTH", key="health", width=health_w)
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

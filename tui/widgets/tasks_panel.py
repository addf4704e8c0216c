"""The tasks table: one row per followed training log, keyed by task id, updated cell by cell."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from collectors.roles import LOG
from tui.tasks import TaskRow
from tui.widgets.composed import composed
from tui.widgets.keyed_table import update_rows
from tui.widgets.panel import SidePanel

PAD = 2
"""Cells a column adds to its content (one on each side)."""
SCROLLBAR = 1
TASK_MIN = 12
"""The task column shrinks to this before any other column goes."""
HEALTH_MIN = 10
"""A health column with a finding in it keeps at least this width."""
TASK_CAP = 120
"""The widest the task column is made for a long path."""


@dataclass(frozen=True)
class TaskColumn:
    """One column: key, header and the widest it needs to be (task and health: their minimum)."""

    key: str
    label: str
    width: int


COLUMNS = (
    TaskColumn("task", "TASK", TASK_MIN),
    TaskColumn("status", "STATUS", 8),
    TaskColumn("progress", "PROGRESS", 18),
    TaskColumn("loss", "LOSS", 8),
    TaskColumn("val", "VAL", 12),
    TaskColumn("speed", "SPEED", 13),
    TaskColumn("eta", "ETA", 8),
    TaskColumn("gpu", "GPU", 7),
    TaskColumn("pid", "PID", 8),
    TaskColumn("vram", "VRAM", 9),
    TaskColumn("health", "HEALTH", HEALTH_MIN),
)
DROP_ORDER = ("eta", "vram", "pid", "gpu", "health", "speed", "val", "progress")
"""Columns left out, in this order, while the rest do not fit; the health column only while it
is empty (a finding is never hidden: the column shrinks instead)."""
HIDDEN_WHEN_EMPTY = ("pid", "vram")
"""Columns left out while no row has anything in them (no task's process is known)."""

Layout = tuple[tuple[str, int], ...]
"""(column key, width) of the shown columns, in order."""


def content_widths(rows: Sequence[TaskRow]) -> dict[str, int]:
    """The width each column needs to show every row whole: its widest cell, or its header.

    The health column needs 0 while no row has anything in it.
    """
    needs = {c.key: len(c.label) for c in COLUMNS}
    needs["health"] = 0
    needs.update((key, 0) for key in HIDDEN_WHEN_EMPTY)
    for row in rows:
        for key, text in row.cells:
            needs[key] = max(needs.get(key, 0), text.cell_len)
        needs["task"] = max(needs["task"], len(row.path))
    return needs


def fitting_columns(width: int, needs: dict[str, int] | None = None) -> Layout:
    """The columns that fit `width` cells and their widths, given what their content needs.

    Columns are as wide as their content (up to their usual width), so at 80 columns PROGRESS,
    VAL and SPEED fit beside the task. What is left over goes to the task's label (up to its
    length), then to HEALTH, the last column.
    """
    needs = needs if needs is not None else {c.key: len(c.label) for c in COLUMNS}
    usable = width - SCROLLBAR
    want = {c.key: min(max(needs.get(c.key, 0), len(c.label)), c.width) for c in COLUMNS}
    task_need = min(max(needs.get("task", 0), len("TASK")), TASK_CAP)
    empty_health = needs.get("health", 0) == 0
    dropped = {key for key in HIDDEN_WHEN_EMPTY if needs.get(key, 0) == 0}
    for key in (None, *DROP_ORDER):
        if key == "health" and not empty_health:
            continue
        if key is not None:
            dropped.add(key)
        shown = [c.key for c in COLUMNS if c.key not in dropped]
        least = sum(want[k] + PAD for k in shown)
        if least <= usable:
            break
    room = usable - least
    widths = dict(want)
    grow = min(room, max(0, task_need - widths["task"]))
    widths["task"] += grow
    room -= grow
    if "health" in shown:
        widths["health"] += room
    else:
        widths["task"] += room
    return tuple((k, max(1, widths[k])) for k in shown)


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
        self._layout: Layout | None = None
        self._needs: dict[str, int] = {}
        """The widest content seen per column since the last resize: columns only widen while
        the terminal keeps its size, so a step count's growth does not rebuild the table."""

    def on_resize(self, event: events.Resize) -> None:
        """Fit the columns to the new width."""
        self._needs = content_widths(self.task_rows)
        self._build_columns()

    def watch_task_rows(self, rows: tuple[TaskRow, ...]) -> None:
        """Remove gone rows, add new ones, update the cells that changed."""
        if self._layout is None:
            # No columns yet: they are laid out on the first resize, or here once the panel
            # has a width. A resize that came while the table was still empty and zero rows
            # high may not come again, and the rows would then never show.
            if self.size.width:
                self._needs = content_widths(rows)
                self._build_columns()
            return
        needs = content_widths(rows)
        if any(needs[k] > self._needs.get(k, 0) for k in needs):
            self._needs = {k: max(v, self._needs.get(k, 0)) for k, v in needs.items()}
            if self._build_columns():
                return
        keys = [key for key, _ in self._layout]
        task_width = dict(self._layout).get("task", 0)

        def cells(row: TaskRow) -> list[tuple[str, Text]]:
            return [(k, row.task_cell(task_width) if k == "task" else row.cell(k)) for k in keys]

        # No `same_row`: Text equality misses a change of base style (a label turning red).
        update_rows(self, self._shown, rows, cells)

    def _build_columns(self) -> bool:
        """Lay the columns out again if they changed; whether they did (rows are re-added)."""
        layout = fitting_columns(self.size.width, self._needs)
        if self._layout == layout:
            return False
        current = self.current_task()
        self._layout = layout
        self.clear(columns=True)
        labels = {c.key: c.label for c in COLUMNS}
        for key, width in layout:
            self.add_column(labels[key], key=key, width=width)
        self._shown = {}
        self.watch_task_rows(self.task_rows)
        if current is not None and current in self._shown:
            self.move_cursor(row=self.get_row_index(current))
        return True

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


class TasksSection(Vertical, SidePanel):
    """The bordered tasks panel: shown once a training log is followed.

    Its rows come from the task feed (`show_tasks`), not from a role's samples; it marks the
    failures of the log sources.
    """

    HEALTH_ROLE = LOG

    def compose(self) -> ComposeResult:
        """The tasks table."""
        yield TasksPanel()

    def body_lines(self) -> int:
        """The header and a line a task."""
        return 1 + len(composed(self, TasksPanel).task_rows)

    def show_tasks(self, rows: tuple[TaskRow, ...]) -> bool:
        """Show the rows; whether the panel is shown (it is hidden while there are none)."""
        composed(self, TasksPanel).task_rows = rows
        self.set_class(bool(rows), "-shown")
        self.set_title(f"Tasks ({len(rows)})  Enter: details")
        return bool(rows)

"""The tables update cells in place: a change of style alone must reach the screen."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import pytest
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import DataTable

from tests.app.helpers import until
from tui.containers import ContainerRow
from tui.processes import ProcessRow
from tui.tasks import TaskRow
from tui.text import same_text
from tui.widgets.container_panel import ContainerPanel, fitting_columns
from tui.widgets.keyed_table import update_rows
from tui.widgets.process_table import ProcessTable
from tui.widgets.tasks_panel import TasksPanel


def row(label_style: str) -> TaskRow:
    return TaskRow(
        "/runs/a/train.log",
        (("task", Text("a/train.log", style=label_style)), ("status", Text("running"))),
    )


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TasksPanel()


def test_same_text_sees_the_base_style() -> None:
    assert Text("x", style="red") == Text("x")  # why same_text exists
    assert not same_text(Text("x", style="red"), Text("x"))
    assert not same_text(Text("x", justify="right"), Text("x"))
    assert same_text(Text.assemble(("x", "red"), "y"), Text.assemble(("x", "red"), "y"))


async def test_a_label_that_turns_red_is_redrawn_red() -> None:
    app = PanelApp()
    async with app.run_test(size=(120, 10)) as pilot:
        panel = app.query_one(TasksPanel)
        panel.task_rows = (row(""),)
        await pilot.pause()
        assert panel.get_cell("/runs/a/train.log", "task").style == ""
        panel.task_rows = (row("bold red"),)
        await pilot.pause()
        assert panel.get_cell("/runs/a/train.log", "task").style == "bold red"


async def test_rows_show_though_the_first_resize_came_before_any_column() -> None:
    # The panel can get its width while it is empty and zero rows high, and no resize follow
    # (the dashboard's tasks panel under load): the next rows lay the columns out themselves.
    app = PanelApp()
    async with app.run_test(size=(120, 10)) as pilot:
        panel = app.query_one(TasksPanel)
        await pilot.pause()
        panel.clear(columns=True)
        panel._layout = None  # as if no resize had reached the panel yet
        assert panel.size.width == 120
        panel.task_rows = (row(""),)
        await pilot.pause()
        assert panel.row_count == 1
        assert str(panel.get_cell("/runs/a/train.log", "status")) == "running"


class ContainersApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ContainerPanel()


async def test_container_rows_show_though_no_resize_laid_the_columns_out() -> None:
    app = ContainersApp()
    async with app.run_test(size=(120, 10)) as pilot:
        panel = app.query_one(ContainerPanel)
        await pilot.pause()
        panel.clear(columns=True)
        panel._columns = None  # as if no resize had reached the panel yet
        panel.container_rows = (
            ContainerRow(
                "c0ffee" * 10,
                "c0ffeec0ffee",
                "trainer",
                "pytorch:24.05",
                "running",
                60.0,
                50.0,
                2 * 2**30,
                8 * 2**30,
                None,
                None,
                None,
                None,
                12,
                "0",
                10 * 2**30,
                (4242,),
            ),
        )
        await pilot.pause()
        assert panel.row_count == 1
        assert "trainer" in [str(cell) for cell in panel.get_row("c0ffee" * 10)]


@dataclass(frozen=True)
class Item:
    key: str
    name: str
    value: str


def item_cells(item: Item) -> list[tuple[str, Text]]:
    return [("name", Text(item.name)), ("value", Text(item.value))]


class CountingTable(DataTable[Text]):
    """A real DataTable that also notes every cell update and row removal."""

    def __init__(self) -> None:
        super().__init__(cursor_type="row")
        self.updates: list[tuple[str, str, str]] = []
        self.removed: list[str] = []

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **kwargs: Any) -> None:
        self.updates.append((str(row_key), str(column_key), value.plain))
        super().update_cell(row_key, column_key, value, **kwargs)

    def remove_row(self, row_key: Any) -> None:
        self.removed.append(str(row_key))
        super().remove_row(row_key)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CountingTable()

    def on_mount(self) -> None:
        table = self.query_one(CountingTable)
        table.add_column("NAME", key="name")
        table.add_column("VALUE", key="value")


def plain_rows(table: DataTable[Text]) -> list[list[str]]:
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_keyed_rows_add_remove_and_update_only_the_changed_cells() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(CountingTable)
        shown: dict[str, Item] = {}
        update_rows(
            table,
            shown,
            [Item("a", "alpha", "1"), Item("b", "beta", "2"), Item("c", "gamma", "3")],
            item_cells,
        )
        await pilot.pause()
        table.move_cursor(row=2)
        assert plain_rows(table) == [["alpha", "1"], ["beta", "2"], ["gamma", "3"]]
        assert table.updates == [] and table.removed == []
        update_rows(
            table,
            shown,
            [Item("a", "alpha", "10"), Item("c", "gamma", "3"), Item("d", "delta", "4")],
            item_cells,
        )
        await pilot.pause()
        assert table.removed == ["b"]
        assert table.updates == [("a", "value", "10")]  # `c` unchanged: not touched
        assert plain_rows(table) == [["alpha", "10"], ["gamma", "3"], ["delta", "4"]]
        assert list(shown) == ["a", "c", "d"] and shown["a"].value == "10"
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value == "c"


async def test_a_row_equal_to_the_shown_one_builds_no_cells_at_all() -> None:
    built: list[str] = []

    def cells(item: Item) -> list[tuple[str, Text]]:
        built.append(item.key)
        return item_cells(item)

    app = TableApp()
    async with app.run_test(size=(80, 10)):
        table = app.query_one(CountingTable)
        shown: dict[str, Item] = {}
        rows = [Item("a", "alpha", "1"), Item("b", "beta", "2")]
        update_rows(table, shown, rows, cells, same_row=operator.eq)
        built.clear()
        update_rows(table, shown, [rows[0], Item("b", "beta", "3")], cells, same_row=operator.eq)
        assert built == ["b", "b"] and table.updates == [("b", "value", "3")]
        built.clear()
        update_rows(table, shown, [rows[0], Item("b", "beta", "3")], cells)  # no same_row
        assert built == ["a", "a", "b", "b"] and table.updates == [("b", "value", "3")]


def test_the_keyed_data_tables_share_the_one_keyed_update() -> None:
    import inspect

    from tui.widgets import tasks_panel

    source = inspect.getsource(tasks_panel)
    assert "update_rows(" in source and "remove_row(" not in source


class FirstResizeTable(ProcessTable):
    """The real process table, noting the lines it had drawn when its first Resize came.

    Textual sends that Resize after the screen's first paint, so those lines are the first
    frame's.
    """

    drawn: dict[int, str]
    at_first_resize: dict[int, str] | None = None

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        self.drawn = {**getattr(self, "drawn", {}), y: strip.text}
        return strip

    def on_resize(self, event: events.Resize) -> None:
        if self.at_first_resize is None:
            self.at_first_resize = dict(getattr(self, "drawn", {}))


class ProcessScreen(Screen[None]):
    """Sets the rows on mount, as the dashboard's screen does with a tick already there."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="panel"):
            yield FirstResizeTable()

    def on_mount(self) -> None:
        self.query_one(FirstResizeTable).rows_shown = (
            ProcessRow("GPU-0/4242", 0, "GPU-0", 4242, 30 << 30, user="alice"),
        )


class ProcessApp(App[None]):
    CSS = ".panel { border: round white; padding: 0 1; }"

    def get_default_screen(self) -> Screen[None]:
        return ProcessScreen()


async def test_the_process_table_has_its_columns_and_rows_before_its_first_paint() -> None:
    app = ProcessApp()
    async with app.run_test(size=(90, 12)) as pilot:
        table = app.screen.query_one(FirstResizeTable)
        await until(pilot, lambda: table.at_first_resize is not None)
        first = table.at_first_resize or {}
        # 90 columns less border and padding: below WIDE_FROM, so no RSS and ELAPSED.
        assert first[0].split() == ["GPU", "PID", "USER", "GPU", "MEM", "CPU%", "COMMAND"]
        assert first[1].split() == ["0", "4242", "alice", "30.0", "GiB", "N/A", "N/A"]
        # The width was the real one: the COMMAND column fills the rest of the 86 but one.
        assert table.size.width == 86 and table.shown_columns()[-1].width == 38
        assert first[0].index("COMMAND") == 86 - 38 - 2 and len(first[0]) == 86


@pytest.mark.parametrize("width", [60, 77, 78, 98, 147, 148, 200])
def test_the_container_columns_fit_the_panel_so_it_never_scrolls_sideways(width: int) -> None:
    columns = fitting_columns(width)
    keys = [c.key for c in columns]
    assert sum(c.width + 2 for c in columns) <= width - 1 or keys == ["name", "gpus", "gpu_mem"]
    assert {"name", "gpus", "gpu_mem"} <= set(keys)
    assert ("image" in keys) == (width >= 148)


def test_at_80_columns_the_pids_go_first() -> None:
    # 78 cells inside the borders, one of them the scrollbar's
    assert [c.key for c in fitting_columns(78)] == [
        "name",
        "status",
        "cpu",
        "memory",
        "gpus",
        "gpu_mem",
    ]
    assert "pids" in [c.key for c in fitting_columns(84)]

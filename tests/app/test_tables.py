"""The tables update cells in place: a change of style alone must reach the screen."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from tui.tasks import TaskRow
from tui.text import same_text
from tui.widgets.tasks_panel import TasksPanel


def row(label_style: str) -> TaskRow:
    return TaskRow("/runs/a/train.log", (("task", Text("a/train.log", style=label_style)),
                                         ("status", Text("running"))))


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

"""What the screen draws after a change, where the dashboard keeps lines it drew before.

The process table keeps each row's line while the row and its look stay the same, the panels
keep their lines while nothing repaints them (`KeptLines`), and the header is drawn as one
line of text. These tests read the screen as the compositor draws it (every widget asked for
its lines) after each kind of change those caches must notice.
"""

from __future__ import annotations

from rich.style import Style
from textual.app import App, ComposeResult, RenderResult
from textual.geometry import Region
from textual.reactive import reactive

from collectors.roles import HOST
from collectors.samples import ProcessInfo
from tests.app.helpers import T0, GiB, ScriptedCollector, gpu, host, tick, until
from tui.app import GpuherdApp, make_app
from tui.widgets.header_bar import HeaderBar
from tui.widgets.kept_lines import KeptLines
from tui.widgets.process_table import ProcessTable

SIZE = (120, 40)


def drawn(app: App[object]) -> list[str]:
    """The screen's lines as the compositor draws them now."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def row_of(app: App[object], pid: int) -> str:
    """The process table's line of `pid` ("" before it is drawn)."""
    lines = [line for line in drawn(app) if f" {pid} " in line and "GiB" in line]
    assert len(lines) <= 1, lines
    return lines[0] if lines else ""


def processes(cpu_pct: float) -> tuple[ProcessInfo, ...]:
    return (
        ProcessInfo(4242, "alice", "python train.py", cpu_pct, 12 * GiB, T0 - 3725.0),
        ProcessInfo(5151, "bob", "python finetune.py", 12.0, 3 * GiB, T0 - 65.0),
    )


async def test_a_changed_process_cell_is_drawn_anew_and_the_cursor_moves_its_highlight() -> None:
    nvml, host_source = ScriptedCollector("nvml"), ScriptedCollector("host", role=HOST)
    app: GpuherdApp = make_app([nvml, host_source], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        host_source.push(host(T0, processes(101.5)))
        await until(pilot, lambda: app.state.host_sample is not None)
        nvml.push(tick(gpu(0), t=T0))
        await until(pilot, lambda: "102%" in row_of(app, 4242))
        before = row_of(app, 4242)

        # the next host sample first, then a tick past the table's redraw step
        host_source.push(host(T0 + 3, processes(57.0)))
        await until(pilot, lambda: app.state.host_sample.taken_at == T0 + 3)
        nvml.push(tick(gpu(0), t=T0 + 3))
        await until(pilot, lambda: "57%" in row_of(app, 4242))
        after = row_of(app, 4242)
        assert "102%" not in after
        assert "1:02:08" in after  # elapsed at the new tick (started 1:02:05 before T0)
        assert after.replace(" 57%", "102%").replace("1:02:08", "1:02:05") == before
        assert "12.0%" not in row_of(app, 5151) and "12%" in row_of(app, 5151)

        # the cursor row is drawn highlighted: moving the cursor redraws both rows' cells
        table = app.screen.query_one(ProcessTable)
        crop = Region(0, 0, table.size.width, table.size.height)
        second_row = 2  # the header, the first process, then the second
        plain = table.render_lines(crop)[second_row]
        assert table.cursor_row == 0
        await pilot.press("down")
        await until(pilot, lambda: table.cursor_row == 1)
        highlighted = table.render_lines(crop)[second_row]
        assert highlighted.text == plain.text
        assert _backgrounds(highlighted) != _backgrounds(plain)

        # the cursor hidden: its row is drawn as the others
        table.show_cursor = False
        await pilot.pause()
        assert _backgrounds(table.render_lines(crop)[second_row]) == _backgrounds(plain)
        table.show_cursor = True
        await pilot.pause()
        assert _backgrounds(table.render_lines(crop)[second_row]) == _backgrounds(highlighted)

        # a new theme gives the cursor new colours
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert _backgrounds(table.render_lines(crop)[second_row]) != _backgrounds(highlighted)


def _backgrounds(strip: object) -> set[object]:
    return {
        segment.style.bgcolor
        for segment in strip  # type: ignore[attr-defined]
        if isinstance(segment.style, Style) and segment.text.strip()
    }


async def test_the_header_clock_moves_on_screen() -> None:
    nvml = ScriptedCollector("nvml")
    now = [T0]
    app: GpuherdApp = make_app([nvml], clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        nvml.push(tick(gpu(0), t=T0))
        await until(pilot, lambda: "580.159.04" in drawn(app)[0])
        first = drawn(app)[0]
        now[0] = T0 + 61
        nvml.push(tick(gpu(0), t=T0 + 61))
        await until(pilot, lambda: drawn(app)[0] != first)
        assert app.screen.query_one(HeaderBar).plain in drawn(app)[0]
        assert first[:-8] == drawn(app)[0][:-8]  # only the time moved: 04:06:40 -> 04:07:41
        assert first[-8:-6] == drawn(app)[0][-8:-6] and first[-5:] != drawn(app)[0][-5:]


class Box(KeptLines):
    """A one-word widget that keeps its lines."""

    DEFAULT_CSS = "Box { width: 12; height: 2; }"
    word: reactive[str] = reactive("one")

    def render(self) -> RenderResult:
        return self.word


class BoxApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Box()


async def test_kept_lines_come_back_until_a_repaint_a_restyle_a_resize_or_a_new_crop() -> None:
    app = BoxApp()
    async with app.run_test(size=(30, 5)) as pilot:
        box = app.query_one(Box)
        crop = Region(0, 0, 12, 2)
        first = box.render_lines(crop)
        assert box.render_lines(crop) is first  # nothing changed: the same lines

        box.word = "two"  # a repaint
        await pilot.pause()
        assert box.render_lines(crop)[0].text.startswith("two")

        before = box.render_lines(crop)
        box.styles.background = "red"  # a restyle
        await pilot.pause()
        restyled = box.render_lines(crop)
        assert restyled is not before and _backgrounds(restyled[0]) != _backgrounds(before[0])

        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert box.render_lines(crop) is not restyled  # a theme restyles every widget

        box.styles.width = 8  # a resize
        await pilot.pause()
        crop = Region(0, 0, 8, 2)
        assert box.render_lines(crop)[0].cell_length == 8

        one_line = box.render_lines(Region(0, 0, 8, 1))  # another crop
        assert len(one_line) == 1

        kept = box.render_lines(crop)
        box.refresh(Region(0, 1, 8, 1))  # a repaint of one line (as a table's cursor moving)
        assert box.render_lines(crop) is not kept

        # DataTable empties the line cache itself when its rows change, with no repaint
        kept = box.render_lines(crop)
        assert box.render_lines(crop) is kept
        box._styles_cache.clear()
        assert box.render_lines(crop) is not kept


class HeaderApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HeaderBar()


async def test_a_host_name_wider_than_the_header_ends_in_an_ellipsis() -> None:
    app = HeaderApp()
    async with app.run_test(size=(30, 3)) as pilot:
        header = app.query_one(HeaderBar)
        header.hostname = "a-very-long-host-name-that-does-not-fit"
        header.now = T0
        await pilot.pause()
        assert header.plain == "gpuherd  a-very-long-host-nam…"
        assert drawn(app)[0] == header.plain

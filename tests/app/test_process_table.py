"""The process table: what it draws, which lines it draws again, and where its cursor goes."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip

from collectors.samples import GpuProcess
from tests.app.helpers import T0, UUID0, UUID1, GiB, ScriptedCollector, gpu, tick, until
from tui.app import GpuherdApp, make_app
from tui.processes import ProcessRow
from tui.widgets.process_table import ProcessTable, visible_keys


def row(pid: int, gpu_index: int = 0, cpu_pct: float = 10.0, **fields: object) -> ProcessRow:
    uuid = f"GPU-{gpu_index}"
    values: dict[str, object] = dict(
        user="alice",
        cpu_pct=cpu_pct,
        rss_bytes=2 * GiB,
        elapsed_s=65.0,
        command=f"python job{pid}.py",
    )
    values.update(fields)
    key = f"{uuid}/{pid}"
    return ProcessRow(key, gpu_index, uuid, pid, 4 * GiB, **values)  # type: ignore[arg-type]


class CountingTable(ProcessTable):
    """The real table, noting each line it is asked to draw."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn: list[int] = []

    def render_line(self, y: int) -> Strip:
        self.drawn.append(y)
        return super().render_line(y)


class TableApp(App[None]):
    CSS = "CountingTable { max-height: 8; }"  # a header and 7 rows in view

    def compose(self) -> ComposeResult:
        yield CountingTable()


def lines(table: ProcessTable) -> list[Strip]:
    """The table's lines as Textual draws them now."""
    return table.render_lines(Region(0, 0, table.size.width, table.size.height))


def backgrounds(strip: Strip) -> set[object]:
    return {s.style.bgcolor for s in strip if isinstance(s.style, Style) and s.text.strip()}


def cursor_line(table: ProcessTable) -> int:
    """The one drawn line in the cursor's colours."""
    cursor = table.get_component_rich_style("process-table--cursor").bgcolor
    found = [y for y, strip in enumerate(lines(table)) if backgrounds(strip) == {cursor}]
    assert len(found) == 1, found
    return found[0]


async def twenty_rows(pilot: Pilot[None], table: ProcessTable) -> list[ProcessRow]:
    """Rows of pids 100 to 119 on the table (more than its view shows), drawn."""
    rows = [row(pid) for pid in range(100, 120)]
    table.rows_shown = tuple(rows)
    await pilot.pause()
    return rows


async def test_one_changed_cpu_redraws_only_its_line() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        rows = [row(100), row(200), row(300)]
        table.rows_shown = tuple(rows)
        await pilot.pause()
        assert [text.split()[1] for text in table.lines()[1:]] == ["100", "200", "300"]
        table.drawn.clear()
        rows[1] = row(200, cpu_pct=77.0)
        table.rows_shown = tuple(rows)
        await pilot.pause()
        assert table.drawn == [2]  # the header is line 0, the second row line 2
        assert "77%" in lines(table)[2].text and "77%" not in lines(table)[1].text
        table.drawn.clear()
        table.rows_shown = tuple(rows)  # the same rows again: nothing to draw
        await pilot.pause()
        assert table.drawn == []


async def test_a_row_scrolled_out_of_view_changes_without_drawing_a_line() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        rows = await twenty_rows(pilot, table)
        table.drawn.clear()
        rows[15] = row(115, cpu_pct=99.0)
        table.rows_shown = tuple(rows)
        await pilot.pause()
        assert table.drawn == []
        await pilot.press("end")  # the cursor to the last row, which scrolls it into view
        assert "99%" in "".join(strip.text for strip in lines(table))


async def three_rows_cursor_on_the_second(
    pilot: Pilot[None], table: ProcessTable
) -> tuple[ProcessRow, ProcessRow, ProcessRow]:
    """Rows of pids 100, 200 and 300 on the focused table, the cursor moved down once."""
    table.focus()
    a, b, c = row(100), row(200), row(300)
    table.rows_shown = (a, b, c)
    await pilot.pause()
    await pilot.press("down")
    return a, b, c


async def test_the_cursor_follows_its_process_when_the_rows_reorder() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        a, b, c = await three_rows_cursor_on_the_second(pilot, table)
        assert table.current_row() == b and cursor_line(table) == 2
        table.rows_shown = (b, c, a)
        await pilot.pause()
        assert table.current_row() == b and table.cursor_row == 0 and cursor_line(table) == 1
        table.rows_shown = (c, a, row(200, cpu_pct=50.0))  # changed and moved to the end
        await pilot.pause()
        current = table.current_row()
        assert current is not None and current.key == b.key and current.cpu_pct == 50.0
        assert cursor_line(table) == 3 and "50%" in lines(table)[3].text


async def test_a_row_leaving_leaves_the_cursor_at_its_place() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        a, b, c = await three_rows_cursor_on_the_second(pilot, table)
        table.rows_shown = (a, c)  # b left: the cursor on the row that took its place
        await pilot.pause()
        assert table.current_row() == c and cursor_line(table) == 2
        table.rows_shown = (a,)  # the last row left: the cursor on the new last
        await pilot.pause()
        assert table.current_row() == a and cursor_line(table) == 1
        table.rows_shown = ()
        await pilot.pause()
        assert table.current_row() is None and table.row_count == 0
        table.rows_shown = (c, b)  # rows again: the cursor on the first
        await pilot.pause()
        assert table.current_row() == c and cursor_line(table) == 1


async def test_keys_move_the_cursor_and_scroll_it_into_view() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.focus()
        table.rows_shown = tuple(row(pid) for pid in range(100, 120))
        await pilot.pause()
        assert table.size.height == 8

        def shown_pids() -> list[str]:
            return [strip.text.split()[1] for strip in lines(table)[1:]]

        await pilot.press("end")
        assert table.cursor_row == 19 and shown_pids()[-1] == "119"
        assert cursor_line(table) == 7
        await pilot.press("home")
        assert table.cursor_row == 0 and shown_pids()[0] == "100" and cursor_line(table) == 1
        await pilot.press("pagedown")
        assert table.cursor_row == 7 and "107" in shown_pids()
        await pilot.press("pagedown", "pagedown", "pagedown")
        assert table.cursor_row == 19 and shown_pids()[-1] == "119"
        await pilot.press("pageup")
        assert table.cursor_row == 12 and "112" in shown_pids()
        await pilot.press("ctrl+home")
        assert table.cursor_row == 0
        await pilot.press("up")  # nothing above the first row
        assert table.cursor_row == 0
        await pilot.press("ctrl+end", "down")
        assert table.cursor_row == 19
        await pilot.press("up")
        assert table.cursor_row == 18 and cursor_line(table) == 6


async def test_the_view_follows_the_cursor_past_its_last_line_and_to_a_moved_row() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.focus()
        rows = tuple(row(pid) for pid in range(100, 120))
        table.rows_shown = rows
        await pilot.pause()
        await pilot.press(*["down"] * 6)  # the last line in view: nothing scrolls yet
        assert table.cursor_row == 6 and table.scroll_offset.y == 0 and cursor_line(table) == 7
        await pilot.press("down")  # one past it: the rows scroll by one
        assert table.cursor_row == 7 and table.scroll_offset.y == 1 and cursor_line(table) == 7
        await pilot.press("pagedown")  # the rows scroll by a page with the cursor
        assert table.cursor_row == 14 and table.scroll_offset.y == 8 and cursor_line(table) == 7
        await pilot.press("ctrl+home")
        assert table.scroll_offset.y == 0
        await pilot.press("pagedown")  # from the top: the page scrolls, the cursor keeps its line
        assert table.cursor_row == 7 and table.scroll_offset.y == 7 and cursor_line(table) == 1
        await pilot.press("ctrl+home")
        # a new order puts the cursor's process (pid 100) last: the view goes with it
        table.rows_shown = rows[1:] + rows[:1]
        await pilot.pause()
        assert table.current_row() == rows[0] and table.cursor_row == 19
        assert table.scroll_offset.y == 13 and cursor_line(table) == 7


async def test_a_row_arriving_or_leaving_redraws_the_changed_rows_on_screen() -> None:
    # A new height is a relayout, which redraws every line: no line-by-line pass is made then,
    # and a row changed in the same update must still reach the screen (the table scrolls).
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        rows = await twenty_rows(pilot, table)

        def screen() -> str:
            return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

        rows[2] = row(102, cpu_pct=77.0)
        rows.append(row(120))
        table.rows_shown = tuple(rows)
        await pilot.pause()
        assert "77%" in screen() and table.row_count == 21
        rows[3] = row(103, cpu_pct=66.0)
        rows.pop()
        table.rows_shown = tuple(rows)
        await pilot.pause()
        assert "66%" in screen() and "77%" in screen() and table.row_count == 20


async def test_a_click_puts_the_cursor_on_the_clicked_row() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.rows_shown = (row(100), row(200), row(300))
        await pilot.pause()
        assert await pilot.click(CountingTable, offset=(20, 3))
        assert table.current_row() == row(300) and cursor_line(table) == 3
        assert await pilot.click(CountingTable, offset=(20, 0))  # the header: no row there
        assert table.current_row() == row(300)


async def test_the_cursor_is_drawn_as_a_row_when_hidden_and_dimmer_when_blurred() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.rows_shown = (row(100), row(200), row(300))
        table.focus()
        await pilot.pause()
        focused = backgrounds(lines(table)[1])
        table.blur()
        await pilot.pause()
        blurred = backgrounds(lines(table)[1])
        assert blurred != focused and cursor_line(table) == 1
        table.show_cursor = False
        await pilot.pause()
        # zebra stripes: the first and third rows alike, the second apart
        drawn = lines(table)
        assert backgrounds(drawn[1]) == backgrounds(drawn[3]) != backgrounds(drawn[2])
        assert blurred not in (backgrounds(drawn[1]), backgrounds(drawn[2]))


async def size_columns(width: int) -> tuple[list[str], str, str]:
    app = TableApp()
    async with app.run_test(size=(width, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.rows_shown = (row(100, rss_bytes=3 * GiB, elapsed_s=3725.0),)
        await pilot.pause()
        keys = [column.key for column in table.shown_columns()]
        drawn = lines(table)
        assert all(strip.cell_length == width for strip in drawn)
        assert table.shown_columns()[-1].width == width - 3 - sum(
            column.width + 2 for column in table.shown_columns()[:-1]
        )
        return keys, drawn[0].text, drawn[1].text


async def test_rss_and_elapsed_show_from_a_width_of_100() -> None:
    keys, header, line = await size_columns(99)
    assert keys == ["gpu", "pid", "user", "gpu_mem", "cpu", "command"]
    assert header.split() == ["GPU", "PID", "USER", "GPU", "MEM", "CPU%", "COMMAND"]
    assert line.split() == ["0", "100", "alice", "4.0", "GiB", "10%", "python", "job100.py"]
    keys, header, line = await size_columns(100)
    assert keys == ["gpu", "pid", "user", "gpu_mem", "cpu", "rss", "elapsed", "command"]
    assert header.split()[-3:] == ["RSS", "ELAPSED", "COMMAND"]
    assert line.split()[-5:] == ["3.0", "GiB", "1:02:05", "python", "job100.py"]
    assert line.index("1:02:05") + len("1:02:05") == header.index("ELAPSED") + len("ELAPSED") + 3


def steering(texts: Sequence[str]) -> list[str]:
    return [
        c for text in texts for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
    ]


async def test_controls_in_others_strings_are_drawn_as_escapes_in_their_styles() -> None:
    app = TableApp()
    async with app.run_test(size=(160, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.rows_shown = (
            row(99),  # the cursor's, drawn in the cursor's colours
            row(
                100,
                user="e\x1b[1m",
                command="rm\x1b[2J\x07 -rf \u202eevil",
                container="box\x1b]0;x\x07",
                job="job 4711\x9b.0",
                task="run\x00/train.log",
            ),
        )
        await pilot.pause()
        strip = lines(table)[2]
        text = strip.text
        assert steering([segment.text for segment in strip]) == []
        assert " e\\x1b[1m " in text
        assert "[box\\x1b]0;x\\x07] job 4711\\x9b.0 run\\x00/train.log: " in text
        assert "rm\\x1b[2J\\x07 -rf \\u202eevil" in text
        # the widget's own line: before Textual turns the ANSI colours into the theme's
        styles = {segment.text: segment.style for segment in table.render_line(2)}
        assert styles["[box\\x1b]0;x\\x07] "].color.name == "magenta"  # type: ignore[union-attr]
        assert styles["job 4711\\x9b.0 "].color.name == "yellow"  # type: ignore[union-attr]
        task = styles["run\\x00/train.log: "]
        assert task.color.name == "cyan" and task.bold  # type: ignore[union-attr]


async def test_a_command_too_long_for_its_column_ends_in_an_ellipsis() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.rows_shown = (row(100, command="python " + "x" * 200), row(200, command=None))
        await pilot.pause()
        long, missing = lines(table)[1].text, lines(table)[2].text
        command_w = table.shown_columns()[-1].width
        assert long.rstrip().endswith("x…") and len(long.rstrip()) == 80 - 2
        assert long.index("python") + command_w == len(long.rstrip())
        assert missing.rstrip().endswith("N/A")


async def test_the_second_gpus_processes_are_drawn_under_the_first_ones() -> None:
    nvml = ScriptedCollector("nvml")
    app: GpuherdApp = make_app([nvml], clock=lambda: T0)
    devices = (
        gpu(0, processes=(GpuProcess(4242, 30 * GiB),)),
        gpu(1, processes=(GpuProcess(6161, 20 * GiB), GpuProcess(7070, 10 * GiB))),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        nvml.push(tick(*devices, t=T0))
        table = app.screen.query_one(ProcessTable)
        await until(pilot, lambda: table.row_count == 3)
        await pilot.pause()
        assert visible_keys(table) == [f"{UUID0}/4242", f"{UUID1}/6161", f"{UUID1}/7070"]
        screen = [strip.text for strip in app.screen._compositor.render_strips()]
        rows = [line for line in screen if "GiB" in line and "N/A" in line]
        drawn = [line.strip("│ ").split()[:2] for line in rows]
        assert drawn == [["0", "4242"], ["1", "6161"], ["1", "7070"]]

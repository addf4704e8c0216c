"""Pilot tests of the dashboard: messages in, widget state out."""

from __future__ import annotations

from typing import Any

import pytest
from textual.geometry import Region
from textual.message import Message

from collectors.base import (
    CollectorError,
    CollectorUnavailable,
    Failed,
    Finished,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.logs.discovery import DiscoveredLogs
from collectors.machine.host import PidWatch
from collectors.roles import GPU
from collectors.samples import GpuProcess, GpuTick, LogBatch
from tests.app.helpers import (
    T0,
    UUID0,
    UUID1,
    GiB,
    MiB,
    ScriptedCollector,
    collectors_done,
    events,
    gpu,
    gpu_source,
    host,
    host_source,
    tick,
    until,
)
from tests.fakes import FakeCollector
from tui.app import GpuherdApp, make_app
from tui.messages import CollectorEventReceived
from tui.screens.error import ErrorScreen
from tui.screens.help import HelpScreen
from tui.widgets.banner import Banner
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.header_bar import HeaderBar
from tui.widgets.host_panel import HostPanel
from tui.widgets.plot import Plot
from tui.widgets.process_table import ProcessTable, visible_keys
from tui.widgets.text_lines import TextLines

SIZE = (120, 40)


def record_notifications(app: GpuherdApp) -> list[dict[str, Any]]:
    """Spy on `app.notify` (run_test turns the toasts themselves off)."""
    seen: list[dict[str, Any]] = []
    original = app.notify

    def notify(message: str, **kwargs: Any) -> None:
        seen.append({"message": message, "severity": kwargs.get("severity", "information")})
        original(message, **kwargs)

    app.notify = notify  # type: ignore[method-assign]
    return seen


def rendered(widget: object) -> str:
    if isinstance(widget, TextLines):
        return widget.plain
    return str(widget.render())  # type: ignore[attr-defined]


async def test_samples_flow_from_collectors_into_the_panels() -> None:
    messages: list[Message] = []
    app = make_app(
        [gpu_source(tick(gpu(0), gpu(1))), host_source(host())], clock=lambda: T0, hostname="box-1"
    )
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        received = events(messages, Sampled)
        assert {m.source for m in received} == {"nvml", "host"}
        assert {m.source for m in events(messages, Finished)} == {"nvml", "host"}
        panel = app.screen.query_one(GpuPanel)
        assert panel.tick is not None and [g.uuid for g in panel.tick.devices] == [UUID0, UUID1]
        assert panel.selected_uuid == UUID0
        text = rendered(panel)
        assert "NVIDIA H200" in text and "GPU-1a2b3c4d" in text and "64°C" in text
        assert "45.5 / 139.8 GiB" in text and "312 / 700 W" in text and "SM 1980 MHz" in text
        assert "CPU" in rendered(app.screen.query_one(HostPanel))
        header = rendered(app.screen.query_one(HeaderBar))
        assert "box-1" in header and "580.159.04" in header
        assert len(app.state.history[UUID0].taken_at) == 1


async def test_gpu_pids_go_to_the_pid_watch() -> None:
    watch = PidWatch()
    devices = (
        gpu(0, processes=(GpuProcess(11, 1 * MiB),)),
        gpu(1, processes=(GpuProcess(22, None), GpuProcess(33, 5 * MiB))),
    )
    app = make_app([gpu_source(tick(*devices))], pid_watch=watch, clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
    assert watch.get() == {11, 22, 33}


async def test_process_rows_are_keyed_by_gpu_and_pid_and_joined_with_host_details() -> None:
    app = make_app([gpu_source(tick(gpu(0))), host_source(host())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        assert visible_keys(table) == [f"{UUID0}/4242", f"{UUID0}/5151"]
        first = list(table.cell_texts(f"{UUID0}/4242").values())
        assert first[:5] == ["0", "4242", "alice", "30.0 GiB", "102%"]
        assert first[-2:] == ["1:02:05", "python train.py --model llama-8b --bs 32"]


async def test_sort_key_cycles_and_keeps_the_cursor_on_its_process() -> None:
    app = make_app([gpu_source(tick(gpu(0))), host_source(host())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        await pilot.press("down")
        assert table.current_row() is not None and table.current_row().pid == 5151
        subtitles = []
        for _ in range(7):
            subtitles.append(app.screen.query_one("#processes").border_subtitle)
            await pilot.press("s")
            assert table.current_row().pid == 5151
        assert subtitles[0].startswith("sort: GPU memory ▼")
        assert subtitles[4].startswith("sort: pid ▲")
        assert len(set(subtitles)) == 7
        assert app.screen.query_one("#processes").border_subtitle == subtitles[0]
        await pilot.press("s", "s", "s", "s")  # pid ascending: 4242 before 5151
        assert [r.pid for r in table.rows_shown] == [4242, 5151]
        assert visible_keys(table) == [f"{UUID0}/4242", f"{UUID0}/5151"]
        await pilot.press("s")  # user ascending, still alice before bob
        await pilot.press("s", "s", "s")  # back round to CPU % descending
        assert app.screen.query_one("#processes").border_subtitle.startswith("sort: CPU %")


async def test_sort_by_pid_reorders_table_rows() -> None:
    devices = (gpu(0, processes=(GpuProcess(100, 1 * MiB), GpuProcess(900, 9 * MiB))),)
    app = make_app([gpu_source(tick(*devices))], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        assert visible_keys(table) == [f"{UUID0}/900", f"{UUID0}/100"]  # most memory first
        await pilot.press("s", "s", "s", "s")  # GPU memory -> CPU -> RSS -> elapsed -> pid
        assert visible_keys(table) == [f"{UUID0}/100", f"{UUID0}/900"]
        await pilot.press("s", "s", "s")  # user, GPU, then back to GPU memory
        assert visible_keys(table) == [f"{UUID0}/900", f"{UUID0}/100"]


async def test_filter_by_user_then_escape_clears_it() -> None:
    app = make_app([gpu_source(tick(gpu(0))), host_source(host())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        await pilot.press("slash")
        assert app.screen.focused is app.screen.query_one("#filter")
        await pilot.press("b", "o", "b")
        assert visible_keys(table) == [f"{UUID0}/5151"]
        assert "filter: 'bob' (1 of 2" in app.screen.query_one("#processes").border_subtitle
        await pilot.press("enter")
        assert app.screen.focused is table and visible_keys(table) == [f"{UUID0}/5151"]
        await pilot.press("escape")
        assert visible_keys(table) == [f"{UUID0}/4242", f"{UUID0}/5151"]
        assert not app.screen.query_one("#filter").has_class("-shown")


async def test_filter_matches_pid_and_command() -> None:
    app = make_app([gpu_source(tick(gpu(0))), host_source(host())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        await pilot.press("slash", "4", "2", "4")
        assert visible_keys(table) == [f"{UUID0}/4242"]
        await pilot.press("escape", "slash", *"LLAMA")
        assert visible_keys(table) == [f"{UUID0}/4242"]
        await pilot.press(*"zzz")
        assert visible_keys(table) == []


async def test_collector_failure_marks_the_panel_until_recovery() -> None:
    source = ScriptedCollector("nvml")
    messages: list[Message] = []
    app = make_app([source], clock=lambda: T0)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        panel = app.screen.query_one("#gpus")
        source.push(tick(gpu(0)))
        await until(pilot, lambda: app.state.gpu_tick is not None)
        assert not panel.has_class("-error")
        source.push(CollectorError("NVML call timed out", title="NVML"))
        await until(pilot, lambda: panel.has_class("-error"))
        assert panel.border_subtitle == "NVML call timed out"
        source.push(CollectorError("NVML call timed out again", title="NVML"))
        await until(pilot, lambda: panel.border_subtitle == "NVML call timed out again")
        errors = [n for n in notes if n["severity"] == "error"]
        assert len(errors) == 1, "one notification per outage, not per failing tick"
        source.push(tick(gpu(0), t=T0 + 1))
        await until(pilot, lambda: not panel.has_class("-error"))
        assert panel.border_subtitle is None
        source.finish()
        await collectors_done(pilot, app)
    kinds = [type(e) for e in events(messages, (Failed, Recovered))]  # type: ignore[arg-type]
    assert kinds == [Failed, Failed, Recovered]


async def test_lost_gpu_shows_an_error_row_while_the_other_keeps_updating() -> None:
    source = ScriptedCollector("nvml")
    app = make_app([source], clock=lambda: T0)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        source.push(tick(gpu(0), gpu(1)))
        await until(pilot, lambda: app.state.gpu_tick is not None)
        source.push(tick(gpu(0, gpu_util_pct=12.0), gpu(1, error="GPU is lost"), t=T0 + 1))
        await until(pilot, lambda: UUID1 in app.state.gpu_errors)
        text = rendered(app.screen.query_one(GpuPanel))
        assert "ERROR: GPU is lost" in text
        assert " 12%" in text
        assert not app.screen.query_one("#gpus").has_class("-error")
        assert len(app.state.history[UUID1].taken_at) == 1
        assert len(app.state.history[UUID0].taken_at) == 2
        assert any("GPU is lost" in n["message"] and n["severity"] == "error" for n in notes)
        source.push(tick(gpu(0), gpu(1), t=T0 + 2))
        await until(pilot, lambda: UUID1 not in app.state.gpu_errors)
        assert "ERROR" not in rendered(app.screen.query_one(GpuPanel))
        source.finish()
        await collectors_done(pilot, app)


async def test_no_driver_shows_the_banner_and_the_host_panel_keeps_working() -> None:
    no_driver = CollectorUnavailable(
        "NVIDIA driver not found: libnvidia-ml.so.1 missing", title="NVML"
    )
    messages: list[Message] = []
    app = make_app(
        [FakeCollector(name="nvml", unavailable=no_driver, role=GPU), host_source(host())],
        clock=lambda: T0,
    )
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        assert events(messages, Unavailable)
        banner = app.screen.query_one(Banner)
        assert banner.display
        text = rendered(banner)
        assert "NVIDIA driver not found: libnvidia-ml.so.1 missing" in text
        assert "gpuherd --demo" in text
        assert app.screen.has_class("-no-gpu")
        assert not app.screen.query_one("#gpus").display
        assert app.screen.query_one("#host").display
        assert "120.0 / 512.0 GiB" in rendered(app.screen.query_one(HostPanel))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "NVIDIA driver not found" in " ".join(
            str(s.render()) for s in app.screen.query(".help-note")
        )
    assert app.state.notices[0].startswith("NVIDIA driver not found")


async def test_replay_mode_has_no_demo_hint_and_says_when_it_finished() -> None:
    app = make_app(
        [gpu_source(tick(gpu(0)), name="replay:gpu")],
        clock=lambda: 0.0,
        replay_label="REPLAY runs/a x2",
    )
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        header = rendered(app.screen.query_one(HeaderBar))
        assert "REPLAY runs/a x2" in header and "replay finished" in header
        assert "2025-11-26 04:06:40" in header, "replay shows the recorded time"


async def test_memory_in_use_by_invisible_processes_is_stated() -> None:
    idle = gpu(0, memory_used_bytes=615 * MiB, processes=())
    unlisted = gpu(1, processes=None)
    app = make_app([gpu_source(tick(idle, unlisted))], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        note = str(app.screen.query_one("#gap-note").render())
        assert "0.6 GiB on GPU 0 in use by processes not visible here" in note
        assert "would not list the processes of GPU 1 (45.5 GiB in use)" in note
        assert app.screen.query_one(ProcessTable).row_count == 0


async def test_fully_attributed_memory_has_no_gap_line() -> None:
    exact = gpu(0, memory_used_bytes=10 * MiB, processes=(GpuProcess(7, 10 * MiB),))
    app = make_app([gpu_source(tick(exact))], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        assert str(app.screen.query_one("#gap-note").render()).strip() == ""


async def test_unknown_fields_show_na() -> None:
    bare = gpu(
        0,
        temperature_c=None,
        power_w=None,
        power_limit_w=None,
        sm_clock_mhz=None,
        gpu_util_pct=None,
        memory_used_bytes=None,
    )
    app = make_app([gpu_source(tick(bare))], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        text = rendered(app.screen.query_one(GpuPanel))
        assert "N/A  N/A  SM N/A" in text
        assert "N/A / 139.8 GiB" in text
        row = app.screen.query_one(ProcessTable).cell_texts(f"{UUID0}/4242")
        assert row["user"] == "N/A" and row["cpu"] == "N/A" and row["command"] == "N/A"


async def test_worker_bug_opens_the_error_screen_and_marks_the_panel() -> None:
    app = make_app([host_source(RuntimeError("boom in sample"))], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ErrorScreen))
        assert "boom in sample" in str(app.screen.query_one("#error-details").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, ErrorScreen)
        assert app.screen.query_one("#host").has_class("-error")
        assert "crashed" in app.screen.query_one("#host").border_subtitle


async def test_help_opens_and_closes() -> None:
    app = make_app([], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def test_history_feeds_the_chart_and_g_selects_the_next_gpu() -> None:
    source = ScriptedCollector("nvml")
    app = make_app([source], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        plot = app.screen.query_one(Plot)
        for i in range(11):  # the chart is redrawn every CHART_STEP_S (10 s) of samples
            # One at a time: a lagging UI would rightly keep only the newest pending tick.
            source.push(tick(gpu(0, gpu_util_pct=float(i)), gpu(1), t=T0 + i))
            await until(pilot, lambda i=i: len(app.state.history.get(UUID0, ())) == i + 1)
            if i == 9:  # 9 s after the first drawing: not yet drawn again
                assert plot.series[1].ys == (0.0,)
        assert plot.series[1].ys == tuple(float(i) for i in range(11))
        assert plot.series[1].xs == tuple(float(x) for x in range(-10, 1))
        assert plot.series[0].ys[0] == pytest.approx(100 * 45.5 / 139.8, abs=0.01)
        assert "GPU 0" in app.screen.query_one("#chart").border_title
        await pilot.press("g")
        assert app.state.selected_uuid == UUID1
        assert "GPU 1" in app.screen.query_one("#chart").border_title
        assert plot.series[1].ys == (87.0,) * 11
        await pilot.press("G")
        assert app.state.selected_uuid == UUID0
        source.finish()
        await collectors_done(pilot, app)


def column_keys(table: ProcessTable) -> list[str]:
    return [column.key for column in table.shown_columns()]


async def test_shrinking_to_60x20_hides_the_chart_and_extra_columns() -> None:
    app = make_app([gpu_source(tick(gpu(0), gpu(1))), host_source(host())], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        assert "rss" in column_keys(table) and app.screen.query_one("#chart").display
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        assert app.screen.has_class("-tiny") and app.screen.has_class("-narrow")
        assert app.screen.query_one("#chart").styles.display == "none"
        assert "rss" not in column_keys(table) and "elapsed" not in column_keys(table)
        assert table.row_count == 4  # pids 4242 and 5151 on both GPUs
        # what is drawn: the narrow columns, each line as wide as the table
        drawn = table.render_lines(Region(0, 0, table.size.width, table.size.height))
        assert "GPU MEM" in drawn[0].text and "RSS" not in drawn[0].text
        assert {strip.cell_length for strip in drawn} == {table.size.width}
        await pilot.resize_terminal(160, 50)
        await pilot.pause()
        assert "rss" in column_keys(table) and table.row_count == 4


def test_newer_sample_replaces_a_pending_one_of_the_same_source_only() -> None:
    def sampled(source: str, sample: object) -> CollectorEventReceived:
        return CollectorEventReceived(Sampled(source, sample))

    newer = sampled("nvml", tick(gpu(0), t=T0 + 1))
    assert newer.can_replace(sampled("nvml", tick(gpu(0))))
    assert not newer.can_replace(sampled("nvml-b", tick(gpu(0))))
    assert not newer.can_replace(CollectorEventReceived(Recovered("nvml")))
    assert sampled("host", host(T0 + 1)).can_replace(sampled("host", host()))
    # A log batch, a scan, or any event but a sample carries news: never dropped.
    batch = LogBatch(path="/r/train.log", taken_at=T0)
    assert not sampled("log:/r/train.log", batch).can_replace(sampled("log:/r/train.log", batch))
    scan = DiscoveredLogs((), ())
    assert not sampled("discovery", scan).can_replace(sampled("discovery", scan))
    failed = CollectorEventReceived(Failed("nvml", CollectorError("gone")))
    assert not failed.can_replace(CollectorEventReceived(Failed("nvml", CollectorError("gone"))))


async def test_process_values_refresh_every_two_seconds_but_new_processes_show_at_once() -> None:
    source = ScriptedCollector("nvml")
    app = make_app([source], clock=lambda: T0)

    def step(t: float, *procs: GpuProcess) -> GpuTick:
        return tick(gpu(0, processes=procs), t=t)

    async with app.run_test(size=(160, 50)) as pilot:
        table = app.screen.query_one(ProcessTable)

        def memory(pid: int) -> float | None:
            rows = {r.pid: r for r in table.rows_shown}
            return rows[pid].gpu_memory_bytes if pid in rows else None

        for item in (step(T0, GpuProcess(4242, 1 * GiB)), step(T0 + 1, GpuProcess(4242, 2 * GiB))):
            source.push(item)
            await until(pilot, lambda item=item: app.state.gpu_tick is item)
        await pilot.pause()
        assert memory(4242) == 1 * GiB  # the same process, 1 s later: not redrawn yet
        item = step(T0 + 2, GpuProcess(4242, 3 * GiB))
        source.push(item)
        await until(pilot, lambda: memory(4242) == 3 * GiB)
        item = step(T0 + 2.5, GpuProcess(4242, 4 * GiB), GpuProcess(777, 1 * GiB))
        source.push(item)
        await until(pilot, lambda: memory(777) == 1 * GiB)  # a new process: at once
        assert memory(4242) == 4 * GiB
        source.finish()

"""Small screens: task columns by content, a compact GPU panel, no dead keys without a GPU, no
"0.0 GiB" line."""

from __future__ import annotations

import pytest

from collectors.base import CollectorUnavailable
from collectors.roles import CONTAINERS, GPU
from collectors.samples import ContainerSample, ContainerTick, GpuProcess, LogBatch
from parsers.model import LogFinding, LogMetric
from tests.app.helpers import (
    T0,
    GiB,
    MiB,
    ScriptedCollector,
    collectors_done,
    gpu,
    host,
    host_source,
    scripted_log,
    tick,
    until,
)
from tests.fakes import FakeCollector
from tui.app import GpuherdApp, make_app
from tui.screens.main import arrangement
from tui.views import gap_note
from tui.widgets.container_panel import ContainerPanel
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.process_table import ProcessTable
from tui.widgets.tasks_panel import TasksPanel

RUN = "/home/alice/experiments/resnet50-lr3e-4-bs256/lightning_logs/version_3/train.log"


def batch(path: str, step: int, finding: bool = False) -> LogBatch:
    metric = LogMetric(
        (("train/loss", 1.25), ("val/acc", 0.731), ("throughput/it_s", 11.8)), step=step, epoch=2
    )
    findings = ((step, LogFinding("nan", "loss=nan")),) if finding else ()
    return LogBatch(
        path, T0, "generic", ((step, metric),), findings, lines_read=1, generation=1, file_path=path
    )


def columns(app: GpuherdApp) -> dict[str, int]:
    table = app.get_default_screen().query_one(TasksPanel)
    return {str(key.value): column.width for key, column in table.columns.items()}


@pytest.mark.parametrize("width", [80, 120, 160])
async def test_progress_val_and_speed_come_before_an_empty_health_column(width: int) -> None:
    log, nvml = scripted_log(RUN), ScriptedCollector("nvml")
    app = make_app([nvml, log], clock=lambda: T0, hostname="box")
    async with app.run_test(size=(width, 40)) as pilot:
        nvml.push(tick())
        log.push(batch(RUN, 1200))
        await until(pilot, lambda: "progress" in columns(app))
        shown = columns(app)
        assert list(shown)[:6] == ["task", "status", "progress", "loss", "val", "speed"]
        if width == 80:
            assert "health" not in shown  # empty: it goes before them
        log.push(batch(RUN, 1300, finding=True))
        table = app.get_default_screen().query_one(TasksPanel)
        await until(
            pilot, lambda: "health" in columns(app) and "NaN" in str(table.get_cell(RUN, "health"))
        )
        assert "progress" in columns(app) and "val" in columns(app)
        log.finish()
        nvml.finish()


async def test_the_task_column_grows_with_the_width() -> None:
    widths, cells = {}, {}
    for width in (80, 120, 160, 200):
        log = scripted_log(RUN)
        app = make_app([log], clock=lambda: T0, hostname="box")
        async with app.run_test(size=(width, 30)) as pilot:
            log.push(batch(RUN, 5))
            await until(
                pilot,
                lambda app=app: (
                    "task" in columns(app)
                    and app.get_default_screen().query_one(TasksPanel).row_count == 1
                ),
            )
            widths[width] = columns(app)["task"]
            table = app.get_default_screen().query_one(TasksPanel)
            cells[width] = str(table.get_cell(RUN, "task"))
            log.finish()
    assert widths[80] < widths[120] < widths[160] <= widths[200]
    assert cells[80] == "version_3/train.log"  # the label: no room for more
    assert cells[120].startswith("…/") and cells[120].endswith("/version_3/train.log")
    assert len(cells[120]) > len("version_3/train.log") + 2
    assert cells[160] == cells[200] == RUN


def eight_gpus(t: float = T0):
    return tick(*(gpu(i, processes=(GpuProcess(4000 + i, 40 * GiB),)) for i in range(8)), t=t)


async def test_eight_gpus_and_the_tasks_fit_80x24_one_line_per_gpu() -> None:
    nvml, log, other = ScriptedCollector("nvml"), scripted_log(RUN), scripted_log("/r/b.log")
    app = make_app([nvml, log, other, host_source(host())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=(80, 24)) as pilot:
        nvml.push(eight_gpus())
        log.push(batch(RUN, 10))
        other.push(batch("/r/b.log", 20))
        screen = app.get_default_screen()
        await until(pilot, lambda: screen.query_one(TasksPanel).row_count == 2)
        await pilot.pause(0.3)
        panel = screen.query_one(GpuPanel)
        assert panel.compact and screen.has_class("-crowded")
        lines = panel.plain.splitlines()
        assert len(lines) == 8 and [
            line.split()[0 if i else 1] for i, line in enumerate(lines)
        ] == [str(i) for i in range(8)]
        assert screen.query_one("#gpus").region.bottom <= 24
        tasks = screen.query_one("#tasks")
        assert tasks.display and tasks.region.bottom <= 23  # above the footer
        assert tasks.region.height == 5  # border, header and both rows
        for source in (nvml, log, other):
            source.finish()


@pytest.mark.parametrize(
    ("height", "gpus", "sides", "expected"),
    [
        (50, 8, (), (False, False, None, None)),  # 160x50: two lines a GPU, as before
        (50, 8, (5,), (False, False, None, None)),  # and two tasks
        (40, 8, (5,), (True, False, None, None)),  # 120x40: one line a GPU, the chart stays
        (24, 8, (5,), (True, True, 10, None)),  # 80x24: crowded, all eight and the tasks
        (24, 1, (), (False, False, None, None)),  # one GPU at 80x24: unchanged
        (24, 16, (5,), (True, True, 10, None)),  # more than fit: the GPU panel scrolls
        # 100x30, one GPU: 20 containers (12 lines) leave the chart no room beside the
        # processes
        (30, 1, (12,), (True, True, 9, None)),
        # 120x40, one GPU: 12 lines of side panels leave the chart and the GPU's two lines
        # room, 13 only one GPU line, 14 not even that
        (40, 1, (8, 4), (False, False, None, None)),
        (40, 1, (9, 4), (True, False, None, None)),
        (40, 1, (10, 4), (True, True, 17, None)),
        # 80x24, one GPU: 20 containers take the rows the chart and host had
        (24, 1, (12,), (True, True, 3, None)),
        # their 12 lines and 4 tasks' 7 leave the GPUs less than a line: both give way
        (24, 1, (12, 7), (True, True, 3, 6)),
        (24, 1, (12, 6), (True, True, 3, 6)),
        # a panel that wants less than an even share leaves the rest to the other
        (24, 1, (12, 5), (True, True, 3, 7)),
        (24, 1, (12, 4), (True, True, 3, 8)),
        (24, 1, (8, 4), (True, True, 3, None)),  # 12 lines of 12: as wanted
        (24, 1, (12, 12, 12), (True, True, 3, 4)),  # every side panel keeps a row
        (10, 1, (), (True, True, 3, None)),  # a tiny terminal, no side panel
        (10, 1, (12,), (True, True, 3, 4)),  # and with one: its header and a row
    ],
)
def test_arrangement(
    height: int, gpus: int, sides: tuple[int, ...], expected: tuple[object, ...]
) -> None:
    middle = 16 if height >= 30 else 5
    assert arrangement(height, gpus, sides, 0, middle) == expected


def many_containers(count: int) -> ContainerTick:
    return ContainerTick(
        T0,
        tuple(
            ContainerSample(f"{k:064x}", f"{k:012x}", f"ctr-{k}", "busybox:1", "running")
            for k in range(count)
        ),
    )


@pytest.mark.parametrize(
    ("size", "tasks", "containers_lines", "tasks_lines"),
    [
        ((80, 24), 0, 12, 0),  # 20 containers: the chart and host give way, not the GPU
        ((80, 24), 4, 6, 6),  # and four tasks: the two share what the GPU and processes leave
        ((100, 30), 4, 11, 7),  # 19 lines of 18: the tasks whole, the containers 11
        ((160, 50), 4, 12, 7),  # room for everything
    ],
)
async def test_side_panels_leave_the_gpus_and_the_processes_in_view(
    size: tuple[int, int], tasks: int, containers_lines: int, tasks_lines: int
) -> None:
    logs = [scripted_log(f"/r/{k}.log") for k in range(tasks)]
    nvml, engine = ScriptedCollector("nvml"), ScriptedCollector("docker", role=CONTAINERS)
    app = make_app([nvml, engine, *logs, host_source(host())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=size) as pilot:
        nvml.push(tick(gpu(0, processes=(GpuProcess(4242, 10 * GiB),))))
        engine.push(many_containers(20))
        for k, log in enumerate(logs):
            log.push(batch(f"/r/{k}.log", 10))
        screen = app.get_default_screen()
        await until(
            pilot,
            lambda: (
                screen.query_one(ContainerPanel).row_count == 20
                and screen.query_one(TasksPanel).row_count == tasks
            ),
        )
        await pilot.pause(0.3)
        height = size[1]
        assert screen.query_one("#containers").region.height == containers_lines
        assert screen.query_one("#tasks").region.height == tasks_lines
        gpus, processes = screen.query_one("#gpus").region, screen.query_one("#processes").region
        assert gpus.height >= 3 and gpus.bottom <= height - 1
        table = screen.query_one(ProcessTable)
        assert processes.height >= 4 and processes.bottom <= height - 1  # above the footer
        assert table.row_count == 1 and table.region.height >= 2  # its header and the row
        assert screen.query_one("#chart").display == (size == (160, 50))
        if size == (80, 24):  # room again: the panels are whole, the chart is back
            await pilot.resize_terminal(160, 50)
            await until(pilot, lambda: screen.query_one("#chart").display)
            await pilot.pause(0.3)
            assert screen.query_one("#containers").region.height == 12
            assert screen.query_one("#tasks").region.height == (7 if tasks else 0)
        for source in (nvml, engine, *logs):
            source.finish()


async def test_without_a_gpu_the_side_panels_and_the_host_have_the_screen() -> None:
    no_driver = CollectorUnavailable("NVIDIA driver not found", title="NVML")
    engine = ScriptedCollector("docker", role=CONTAINERS)
    app = make_app(
        [FakeCollector(name="nvml", unavailable=no_driver, role=GPU), engine, host_source(host())],
        clock=lambda: T0,
    )
    async with app.run_test(size=(100, 30)) as pilot:
        engine.push(many_containers(20))
        screen = app.get_default_screen()
        await until(
            pilot,
            lambda: (
                screen.has_class("-no-gpu") and screen.query_one(ContainerPanel).row_count == 20
            ),
        )
        await pilot.pause(0.3)
        assert not screen.has_class("-crowded")
        assert screen.query_one("#containers").region.height == 12
        assert screen.query_one("#host").region.height > 3  # more than one line of figures
        engine.finish()


async def test_without_a_gpu_the_footer_offers_no_dead_keys_and_slash_opens_nothing() -> None:
    no_driver = CollectorUnavailable("NVIDIA driver not found", title="NVML")
    app = make_app(
        [FakeCollector(name="nvml", unavailable=no_driver, role=GPU), host_source(host())],
        clock=lambda: T0,
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        screen = app.get_default_screen()
        assert screen.has_class("-no-gpu")
        keys = {b.binding.key for b in app.active_bindings.values() if b.enabled and b.binding.show}
        assert not keys & {"slash", "s", "g"} and {"q", "question_mark"} <= keys
        await pilot.press("slash", "a")
        await pilot.pause()
        assert not screen.query_one("#filter").has_class("-shown")
        assert app.focused is None or app.focused.id != "filter"


@pytest.mark.parametrize(
    ("gap", "line"),
    [
        (0, ""),
        (40 * MiB, ""),  # would read 0.0 GiB
        (51 * MiB, ""),
        (60 * MiB, "0.1 GiB on GPU 0 in use by processes not visible here"),
        (int(0.6 * GiB), "0.6 GiB on GPU 0 in use by processes not visible here"),
    ],
)
def test_no_line_says_zero_gib_is_hidden(gap: int, line: str) -> None:
    sample = gpu(0, memory_used_bytes=10 * GiB + gap, processes=(GpuProcess(1, 10 * GiB),))
    text = gap_note(tick(sample), any_rows=True).plain
    assert (line in text) if line else text == ""
    assert "0.0 GiB" not in text


def test_a_gpu_whose_processes_are_not_listed_says_so_in_mib() -> None:
    sample = gpu(0, memory_used_bytes=40 * MiB, processes=None)
    assert gap_note(tick(sample), False).plain == (
        "The driver would not list the processes of GPU 0 (40 MiB in use)"
    )

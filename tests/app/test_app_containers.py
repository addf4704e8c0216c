"""The containers panel: exact cells, sorting both ways, the process filter, failure states."""

from __future__ import annotations

from collections.abc import Sequence

from collectors.base import CollectorError
from collectors.machine.containers import NoEngine
from collectors.roles import CONTAINERS, HOST
from collectors.samples import ContainerSample, ContainerTick, GpuProcess, ProcessInfo
from tests.app.helpers import T0, GiB, MiB, ScriptedCollector, gpu, host, tick, until
from tui.app import GpuherdApp, make_app
from tui.screens.help import HelpScreen
from tui.widgets.banner import Banner
from tui.widgets.container_panel import ContainerPanel, visible_names
from tui.widgets.process_table import ProcessTable

SIZE = (180, 50)
A, B, C = "a" * 64, "b" * 64, "c" * 64


def containers(t: float = T0, *, trainer_cpu: float = 150.5) -> ContainerTick:
    return ContainerTick(
        t,
        (
            ContainerSample(
                id=B,
                short_id=B[:12],
                name="etl",
                image="busybox:1",
                status="running",
                started_at=T0 - 65,
                cpu_pct=12.0,
                memory_used_bytes=300 * MiB,
                memory_limit_bytes=512 * MiB,
                net_rx_bytes_per_s=None,
                net_tx_bytes_per_s=None,
                block_read_bytes_per_s=2048.0,
                block_write_bytes_per_s=0.0,
                pids=3,
                gpu_devices=("1",),
            ),
            ContainerSample(
                id=C,
                short_id=C[:12],
                name="idle",
                image="busybox:1",
                status="paused",
                started_at=T0 - 7200,
                cpu_pct=None,
                memory_used_bytes=None,
                memory_limit_bytes=None,
                pids=1,
            ),
            ContainerSample(
                id=A,
                short_id=A[:12],
                name="trainer",
                image="pytorch:24.10",
                status="running",
                started_at=T0 - 3725,
                cpu_pct=trainer_cpu,
                memory_used_bytes=int(1.5 * GiB),
                memory_limit_bytes=8 * GiB,
                net_rx_bytes_per_s=1536.0,
                net_tx_bytes_per_s=100.0,
                pids=12,
                gpu_devices=("0", "1"),
            ),
        ),
        engine="Docker 20.10.24",
    )


GPUS = tick(
    gpu(0, processes=(GpuProcess(4242, 30 * GiB), GpuProcess(5151, 15 * GiB))),
    gpu(1, processes=(GpuProcess(6161, 2 * GiB), GpuProcess(7070, 1 * GiB))),
)
HOST_SAMPLE = host(
    processes=(
        ProcessInfo(4242, "alice", "python train.py", 100.0, GiB, T0 - 60, A[:12]),
        ProcessInfo(6161, "alice", "python eval.py", 50.0, GiB, T0 - 60, A[:12]),
        ProcessInfo(5151, "bob", "python etl.py", 10.0, GiB, T0 - 60, B[:12]),
        ProcessInfo(7070, "carol", "python bare.py", 10.0, GiB, T0 - 60, None),
    )
)


async def started(pilot, app: GpuherdApp, sources: Sequence[ScriptedCollector]) -> None:
    gpus, hosts, docker = sources
    hosts.push(HOST_SAMPLE)
    await until(pilot, lambda: app.state.host_sample is not None)
    gpus.push(GPUS)
    await until(pilot, lambda: app.state.gpu_tick is not None)
    docker.push(containers())
    await until(pilot, lambda: app.screen.query_one(ContainerPanel).row_count == 3)
    await pilot.pause()


def make() -> tuple[GpuherdApp, list[ScriptedCollector]]:
    sources = [
        ScriptedCollector("nvml"),
        ScriptedCollector("host", role=HOST),
        ScriptedCollector("docker", role=CONTAINERS),
    ]
    return make_app(sources, clock=lambda: T0, hostname="box"), sources


def cells(panel: ContainerPanel, name: str) -> dict[str, str]:
    row = next(r for r in panel.shown_rows() if r.name == name)
    keys = [str(c.key.value) for c in panel.ordered_columns]
    return dict(zip(keys, (t.plain for t in panel.get_row(row.key)), strict=True))


def process_pids(app: GpuherdApp) -> list[int]:
    return sorted(r.pid for r in app.screen.query_one(ProcessTable).rows_shown)


async def test_each_container_shows_its_stats_and_the_gpu_memory_of_its_processes() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        panel = app.screen.query_one(ContainerPanel)
        assert panel.display and panel.region.height > 0
        assert cells(panel, "trainer") == {
            "name": "trainer",
            "image": "pytorch:24.10",
            "status": "running",
            "uptime": "1h 02m",
            "cpu": "150%",
            "memory": "1.5 GiB / 8.0 GiB",
            "net": "1.5 KiB / 100 B",
            "block": "N/A",
            "pids": "12",
            "gpus": "0,1",
            "gpu_mem": "32.0 GiB",
        }
        assert cells(panel, "etl") == {
            "name": "etl",
            "image": "busybox:1",
            "status": "running",
            "uptime": "1m",
            "cpu": "12%",
            "memory": "300 MiB / 512 MiB",
            "net": "N/A",
            "block": "2.0 KiB / 0 B",
            "pids": "3",
            "gpus": "1",
            "gpu_mem": "15.0 GiB",
        }
        assert cells(panel, "idle")["cpu"] == "N/A"
        assert cells(panel, "idle")["gpu_mem"] == "-"
        assert cells(panel, "idle")["gpus"] == "-"
        # The process table names the container instead of showing its id.
        commands = {r.pid: r.container for r in app.screen.query_one(ProcessTable).rows_shown}
        assert commands == {4242: "trainer", 6161: "trainer", 5151: "etl", 7070: None}
        docker = sources[2]
        docker.push(containers(T0 + 1, trainer_cpu=42.0))
        await until(pilot, lambda: cells(panel, "trainer")["cpu"] == "42%")


async def test_s_cycles_the_sort_and_r_reverses_it() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        panel = app.screen.query_one(ContainerPanel)
        assert visible_names(panel) == ["trainer", "etl", "idle"]  # GPU memory, most first
        await pilot.press("c", "r")
        assert visible_names(panel) == ["idle", "etl", "trainer"]
        await pilot.press("s")  # CPU %, highest first again
        assert visible_names(panel) == ["trainer", "etl", "idle"]
        assert "sort: CPU % ▼" in str(panel.border_title)
        await pilot.press("r")
        assert visible_names(panel) == ["idle", "etl", "trainer"]
        assert "sort: CPU % ▲" in str(panel.border_title)
        await pilot.press("s", "s", "s")  # name, A to Z
        assert visible_names(panel) == ["etl", "idle", "trainer"]
        await pilot.press("r")
        assert visible_names(panel) == ["trainer", "idle", "etl"]


async def test_enter_on_a_container_filters_the_processes_to_it_and_esc_clears() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        assert process_pids(app) == [4242, 5151, 6161, 7070]
        await pilot.press("c", "enter")  # the first row: trainer
        await until(pilot, lambda: process_pids(app) == [4242, 6161])
        assert isinstance(app.focused, ProcessTable)
        assert "container: trainer (2 of 4, Esc clears)" in str(
            app.screen.query_one("#processes").border_subtitle
        )
        await pilot.press("c", "down", "enter")  # the second: etl, not only the first
        await until(pilot, lambda: process_pids(app) == [5151])
        await pilot.press("escape")
        await until(pilot, lambda: process_pids(app) == [4242, 5151, 6161, 7070])
        assert "container" not in str(app.screen.query_one("#processes").border_subtitle)


async def test_an_engine_that_stops_answering_is_marked_on_the_panel_until_it_answers() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        panel = app.screen.query_one(ContainerPanel)
        banner = app.screen.query_one(Banner)
        sources[2].push(
            CollectorError(
                "the container engine at unix:///var/run/docker.sock "
                "is not running (No such file or directory)"
            )
        )
        await until(pilot, lambda: panel.has_class("-error"))
        assert str(panel.border_subtitle).startswith(
            "the container engine at unix:///var/run/docker.sock is not running"
        )
        assert panel.display and "container engine" not in str(banner.render())
        sources[2].push(containers(T0 + 2, trainer_cpu=7.0))
        await until(pilot, lambda: not panel.has_class("-error"))
        assert not panel.border_subtitle
        assert cells(panel, "trainer")["cpu"] == "7%"


async def test_no_engine_hides_the_panel_and_says_why_only_in_the_help() -> None:
    docker = ScriptedCollector("docker", role=CONTAINERS)
    reason = "no container engine: no socket at /var/run/docker.sock"

    def refuse() -> None:
        raise NoEngine(reason, title="Containers")

    docker.open = refuse  # type: ignore[method-assign]
    hosts = ScriptedCollector("host", role=HOST)
    app = make_app([hosts, docker], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        hosts.push(HOST_SAMPLE)
        await until(pilot, lambda: reason in app.help_notes)
        await pilot.pause()
        panel = app.screen.query_one(ContainerPanel)
        assert not panel.display and panel.region.height == 0
        assert reason not in str(app.screen.query_one(Banner).render())
        assert reason not in app.state.notices
        await pilot.press("c")  # no panel to go to
        assert not isinstance(app.focused, ContainerPanel)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert reason in app.screen.unavailable

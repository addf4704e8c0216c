"""The containers panel redraws only when a cell it shows changes, and uptime is coarse."""

from __future__ import annotations

import math

import pytest

from collectors.roles import CONTAINERS, HOST
from collectors.samples import GpuProcess
from gpuherd.present.format import fmt_uptime
from tests.app.helpers import T0, GiB, ScriptedCollector, gpu, tick, until
from tests.app.test_app_containers import GPUS, HOST_SAMPLE, cells, containers
from tui.app import GpuherdApp, make_app
from tui.widgets.container_panel import ContainerPanel

SIZE = (180, 50)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (65, "1m"),
        (3599, "59m"),
        (3600, "1h 00m"),
        (3725, "1h 02m"),
        (86399, "23h 59m"),
        (86400, "1d 00h"),
        (90000 + 86400 * 99, "100d 01h"),
        (None, "N/A"),
        (-1, "N/A"),
        (math.nan, "N/A"),
        (math.inf, "N/A"),
    ],
)
def test_uptime_shows_seconds_only_in_the_first_minute(seconds: float | None, text: str) -> None:
    assert fmt_uptime(seconds) == text


class Counting:
    """Counts the panel's `update_cell` and `refresh` calls (each repaints the whole table)."""

    def __init__(self, panel: ContainerPanel) -> None:
        self.cells: list[tuple[str, str, str]] = []
        self.refreshes = 0
        update_cell, refresh = panel.update_cell, panel.refresh

        def counted_update(row_key, column_key, value, **kw):  # type: ignore[no-untyped-def]
            self.cells.append((str(row_key), str(column_key), value.plain))
            return update_cell(row_key, column_key, value, **kw)

        def counted_refresh(*args, **kw):  # type: ignore[no-untyped-def]
            self.refreshes += 1
            return refresh(*args, **kw)

        panel.update_cell = counted_update  # type: ignore[method-assign]
        panel.refresh = counted_refresh  # type: ignore[method-assign]


def make(now: list[float]) -> tuple[GpuherdApp, list[ScriptedCollector]]:
    sources = [
        ScriptedCollector("nvml"),
        ScriptedCollector("host", role=HOST),
        ScriptedCollector("docker", role=CONTAINERS),
    ]
    return make_app(sources, clock=lambda: now[0], hostname="box"), sources


async def start(pilot, app: GpuherdApp, sources: list[ScriptedCollector]) -> ContainerPanel:  # type: ignore[no-untyped-def]
    gpus, hosts, docker = sources
    hosts.push(HOST_SAMPLE)
    await until(pilot, lambda: app.state.host_sample is not None)
    gpus.push(GPUS)
    await until(pilot, lambda: app.state.gpu_tick is not None)
    docker.push(containers())
    panel = app.screen.query_one(ContainerPanel)
    await until(pilot, lambda: panel.row_count == 3)
    await pilot.pause()
    return panel


async def test_a_container_tick_that_changes_no_cell_touches_no_cell() -> None:
    now = [T0]
    app, sources = make(now)
    async with app.run_test(size=SIZE) as pilot:
        panel = await start(pilot, app, sources)
        docker = sources[2]
        counting = Counting(panel)
        # A second later every uptime moved by one second, and nothing else: no cell is drawn.
        now[0] = T0 + 1
        later = containers(T0 + 1)
        docker.push(later)
        await until(pilot, lambda: app.state.samples(CONTAINERS)[0] is later)
        await pilot.pause()
        assert counting.cells == [] and counting.refreshes == 0
        # 55 s later etl (65 s up at T0) turns 2m and trainer (3725 s) 1h 03m: those two cells.
        now[0] = T0 + 55
        docker.push(containers(T0 + 55))
        await until(pilot, lambda: cells(panel, "etl")["uptime"] == "2m")
        await pilot.pause()
        assert sorted(counting.cells) == [
            ("a" * 64, "uptime", "1h 03m"),
            ("b" * 64, "uptime", "2m"),
        ]
        assert cells(panel, "idle")["uptime"] == "2h 00m"


async def test_a_gpu_tick_redraws_the_panel_only_when_a_containers_gpu_memory_moved() -> None:
    now = [T0]
    app, sources = make(now)
    async with app.run_test(size=SIZE) as pilot:
        panel = await start(pilot, app, sources)
        gpus = sources[0]
        counting = Counting(panel)
        # The same GPU use a minute later: the panel waits for the engine's next tick, so
        # etl's uptime stays as the engine's last tick left it.
        now[0] = T0 + 60
        same = tick(*GPUS.devices, t=T0 + 60)
        gpus.push(same)
        await until(pilot, lambda: app.state.gpu_tick is same)
        await pilot.pause()
        assert counting.cells == [] and counting.refreshes == 0
        assert cells(panel, "etl")["uptime"] == "1m"
        # etl's process (pid 5151 on GPU 0) grows from 15 to 20 GiB: the panel is redrawn.
        grown = tick(
            gpu(0, processes=(GpuProcess(4242, 30 * GiB), GpuProcess(5151, 20 * GiB))),
            GPUS.devices[1],
            t=T0 + 61,
        )
        gpus.push(grown)
        await until(pilot, lambda: cells(panel, "etl")["gpu_mem"] == "20.0 GiB")
        assert ("b" * 64, "gpu_mem", "20.0 GiB") in counting.cells
        assert cells(panel, "etl")["uptime"] == "2m"

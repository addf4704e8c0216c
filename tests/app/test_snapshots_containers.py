"""Snapshot of the dashboard with the containers panel, from fixed samples and a fixed clock."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from collectors.roles import CONTAINERS, HOST
from tests.app.helpers import T0, ScriptedCollector, until
from tests.app.test_app_containers import GPUS, HOST_SAMPLE, containers
from tui.app import make_app
from tui.widgets.container_panel import ContainerPanel


def test_containers_panel(snap_compare: Callable[..., bool]) -> None:
    gpus, hosts = ScriptedCollector("nvml"), ScriptedCollector("host", role=HOST)
    docker = ScriptedCollector("docker", role=CONTAINERS)
    app = make_app([gpus, hosts, docker], clock=lambda: T0, hostname="gpu-box-3")

    async def feed(pilot: Pilot[object]) -> None:
        hosts.push(HOST_SAMPLE)
        await until(pilot, lambda: app.state.host_sample is not None)
        gpus.push(GPUS)
        await until(pilot, lambda: app.state.gpu_tick is GPUS)
        docker.push(containers())
        await until(pilot, lambda: app.screen.query_one(ContainerPanel).row_count == 3)
        app.clear_notifications()
        for widget in app.screen.walk_children(with_self=True):
            widget.refresh(layout=True)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 50), run_before=feed)

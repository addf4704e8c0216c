"""Container ticks reach the dashboard's state for the containers panel, without a redraw."""

from __future__ import annotations

from collectors.base import CollectorError
from collectors.roles import CONTAINERS
from collectors.samples import ContainerSample, ContainerTick
from tests.app.helpers import T0, ScriptedCollector, until
from tui.app import make_app
from tui.screens.main import MainScreen
from tui.widgets.banner import Banner

SIZE = (160, 50)
TICK = ContainerTick(T0, (ContainerSample(id="a" * 64, short_id="a" * 12, name="trainer",
                                          image="busybox:1", status="running"),))


async def test_container_ticks_are_kept_by_role_and_do_not_redraw_the_screen() -> None:
    redraws: list[str | None] = []
    docker = ScriptedCollector("docker", role=CONTAINERS)
    app = make_app([docker], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        real_show = screen.show
        screen.show = lambda changed=None: (redraws.append(changed), real_show(changed))[1]
        docker.push(TICK)
        await until(pilot, lambda: app.state.samples(CONTAINERS) == [TICK])
        assert app.state.sources(CONTAINERS) == ["docker"]
        assert CONTAINERS not in redraws


async def test_an_engine_that_stops_answering_is_said_on_the_banner_until_it_answers() -> None:
    docker = ScriptedCollector("docker", role=CONTAINERS)
    app = make_app([docker], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        banner = app.screen.query_one(Banner)
        docker.push(CollectorError("the container engine at unix:///var/run/docker.sock is "
                                   "not running (No such file or directory)"))
        await until(pilot, lambda: "docker: the container engine" in str(banner.render()))
        docker.push(TICK)
        await until(pilot, lambda: "container engine" not in str(banner.render()))
        assert app.state.samples(CONTAINERS) == [TICK]

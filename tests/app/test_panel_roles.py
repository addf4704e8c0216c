"""Panels subscribe to their roles: a new panel gets its role's samples and marks its failures
with no edit of the screen, and the process table's sort and filter are its own."""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import Static

from collectors.base import CollectorError
from collectors.roles import GPU
from tests.app.helpers import T0, ScriptedCollector, gpu, host, tick, until
from tui.app import make_app
from tui.screens.main import MainScreen
from tui.state import MonitorState
from tui.widgets.panel import Panel
from tui.widgets.process_panel import ProcessPanel

PROBE = "probe"


@dataclass(frozen=True)
class ProbeSample:
    """A sample of a role no built-in panel shows."""

    value: int


class ProbePanel(Static, Panel):
    """A panel the screen has never heard of: it records what it was handed."""

    ROLES = frozenset({PROBE})
    HEALTH_ROLE = PROBE

    def __init__(self) -> None:
        super().__init__(id="probe")
        self.seen: list[str | None] = []
        self.values: list[int] = []

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        self.seen.append(changed)
        self.values = [s.value for s in state.samples(PROBE)]


async def test_a_new_panel_gets_its_roles_samples_and_marks_its_sources_failures() -> None:
    gpus = ScriptedCollector("nvml")
    probe_source = ScriptedCollector("probe-source", role=PROBE)
    hosts = ScriptedCollector("host", role="host")
    app = make_app([gpus, probe_source, hosts])
    async with app.run_test(size=(120, 40)) as pilot:
        gpus.push(tick(gpu(0)))  # the screen has shown a change before the panel comes
        await until(pilot, lambda: app.state.gpu_tick is not None)
        panel = ProbePanel()
        await app.screen.mount(panel)
        gpus.push(tick(gpu(0), t=T0 + 1))
        await until(pilot, lambda: app.state.gpu_tick.taken_at == T0 + 1)
        assert GPU not in panel.seen  # not its role
        probe_source.push(ProbeSample(7))
        await until(pilot, lambda: panel.values == [7])
        assert panel.seen[-1] == PROBE
        probe_source.push(CollectorError("the probe is down"))
        await until(pilot, lambda: panel.has_class("-error"))
        assert "the probe is down" in str(panel.border_subtitle)
        # its failures are on the panel, not on the banner
        assert not any("the probe is down" in line for line in app.screen.query_one("Banner").lines)  # type: ignore[attr-defined]
        probe_source.finish()
        gpus.finish()
        hosts.finish()


async def test_sort_and_filter_are_the_process_panels_own() -> None:
    gpus, hosts = ScriptedCollector("nvml"), ScriptedCollector("host", role="host")
    app = make_app([gpus, hosts])
    async with app.run_test(size=(120, 40)) as pilot:
        hosts.push(host())
        gpus.push(tick(gpu(0)))
        await until(pilot, lambda: app.state.gpu_tick is not None)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        panel = screen.query_one(ProcessPanel)
        first = panel.sort_key
        await pilot.press("s")
        assert panel.sort_key != first
        await pilot.press("slash", "b", "o", "b")
        await until(pilot, lambda: panel.filter_text == "bob")
        assert not hasattr(screen, "sort_key") and not hasattr(screen, "filter_text")
        gpus.finish()
        hosts.finish()

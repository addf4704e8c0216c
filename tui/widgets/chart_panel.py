"""The history chart panel: the selected GPU's memory and utilisation over the last ten minutes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical

from collectors.roles import GPU
from tui.views import chart_series, chart_title
from tui.widgets.composed import composed
from tui.widgets.panel import Panel
from tui.widgets.plot import Plot

if TYPE_CHECKING:
    from tui.state import MonitorState

CHART_STEP_S = 10.0
"""Seconds of sample time between chart redraws. A chart point spans about 13 s of the ten
minutes at 160 columns (the maximum of its samples), so there a redraw moves the picture by
less than a point (on a wider terminal, by a point or two); the GPU panel shows each second's
values. The chart is the costliest widget to draw: redrawn every 5 s it was a fifth of the
dashboard's drawing."""

HISTORY_TICKS = ((-600.0, "-10 min"), (-300.0, "-5 min"), (0.0, "now"))
"""The history chart's x axis: seconds before the newest sample, labelled with their unit."""


class ChartPanel(Vertical, Panel):
    """The chart of the selected GPU.

    Redrawn every `CHART_STEP_S` of sample time, or at once when another GPU is chosen.
    """

    ROLES = frozenset({GPU})

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._drawn: tuple[str | None, float | None] = (None, None)

    def compose(self) -> ComposeResult:
        """One plot."""
        yield Plot()

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """Redraw when the selected GPU changed or enough sample time passed."""
        uuid = state.selected_uuid
        history = state.history.get(uuid) if uuid else None
        newest = history.taken_at[-1] if history else None
        drawn_uuid, drawn_at = self._drawn
        # A chart point spans several seconds of the 10-minute window, so redrawing every
        # CHART_STEP_S of recorded time shows the same picture at a fraction of the cost.
        if (
            uuid == drawn_uuid
            and newest is not None
            and drawn_at is not None
            and newest - drawn_at < CHART_STEP_S
            and newest >= drawn_at
        ):
            return
        self._drawn = (uuid, newest)
        plot = composed(self, Plot)
        plot.series = chart_series(history)
        plot.x_range = (-600.0, 0.0)
        plot.x_ticks = HISTORY_TICKS
        plot.y_range = (0.0, 100.0)
        self.set_title(chart_title(state.gpu_tick, uuid))

"""The one widget that talks to plotext: a line chart drawn from plain series on each render."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive

from gpuherd.present.chart_values import (
    drawable,
    even_ticks,
    fixed_ticks,
    log_labels,
    log_ticks,
    nice_ticks,
    tick_labels,
)
from tui.widgets.kept_lines import KeptLines

if TYPE_CHECKING:
    from plotext._figure import _figure_class as PlotextFigure

FRAME_ROWS = 3
"""Rows of a plotext figure that are not the plot: the top frame, the x axis, its labels."""
X_LABEL_CELLS = 10
"""About one x tick label per this many columns."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: x and y values of equal length, a legend label and a plotext colour name."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str


class Plot(KeptLines):
    """A line chart of `series`; each widget owns its own plotext figure.

    plotext's module-level API shares one global figure, so two charts (or a chart and a test)
    would draw into each other; a private figure, used only from `render`, avoids that.
    plotext takes about a tenth of a second to import, so the first frame is drawn without it:
    the figure is made once that frame is up, and the chart follows at once. Between two
    redraws the drawn lines are kept (`KeptLines`): the chart is redrawn every 10 s of samples.
    """

    DEFAULT_CSS = """
    Plot {
        width: 1fr;
        height: 1fr;
        min-height: 5;
    }
    """

    series: reactive[tuple[Series, ...]] = reactive(())
    """Lines to draw; assign a new tuple to redraw."""
    x_range: reactive[tuple[float, float] | None] = reactive(None)
    """Fixed x-axis limits, or `None` to fit the data."""
    y_range: reactive[tuple[float, float] | None] = reactive(None)
    """Fixed y-axis limits, or `None` to fit the data."""
    placeholder: reactive[str] = reactive("no data yet")
    """Shown instead of an empty chart."""
    x_ticks: reactive[tuple[tuple[float, str], ...] | None] = reactive(None)
    """Fixed x ticks with their labels (`-10 min` ... `now`); `None` to place round ones."""
    x_integer: reactive[bool] = reactive(False)
    """Round x ticks on whole numbers only (steps)."""
    log_y: reactive[bool] = reactive(False)
    """A log10 y axis; values at or below zero are left out."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._figure: PlotextFigure | None = None

    def _make_figure(self) -> None:
        if self._figure is not None:
            return
        from plotext._figure import _figure_class  # plotext 5.x, pinned in pyproject

        figure = _figure_class()
        # plotext clamps a figure to the size of the terminal it thinks it runs in (80x24 when
        # stdout is not a tty, as under Textual); the widget's size is the only limit we want.
        figure._limit_size(False, False)
        figure.theme("clear")
        self._figure = figure
        self.refresh()

    def render(self) -> RenderResult:
        """Draw the series at the widget's current size."""
        width, height = self.size.width, self.size.height
        # Values plotext cannot scale (a corrupt session's -5 % or 1e308) would raise inside
        # render, which Textual turns into a crash; they are drawn at the edge instead.
        lines = [(s, drawable(s.xs, s.ys, self.x_range, self.y_range)) for s in self.series]
        if self.log_y:
            lines = [(s, _log10(points)) for s, points in lines]
        lines = [(s, points) for s, points in lines if points[0]]
        if not lines or width < 20 or height < 5:
            return Text(self.placeholder, style="dim")
        figure = self._figure
        if figure is None:
            self.call_after_refresh(self._make_figure)
            return Text("")
        # clear_data, not clear_figure: the latter re-creates the figure and re-reads the
        # terminal size, undoing the size limit set in __init__. Limits and ticks outlive
        # clear_data, so every one of them is set again below.
        figure.clear_data()
        figure.plotsize(width, height)
        for line, (line_xs, line_ys) in lines:
            # One point per two cells: lines between points still fill the braille dots.
            xs, ys = decimate(line_xs, line_ys, max(10, (width - 8) // 2))
            figure.plot(xs, ys, label=line.label, color=line.color, marker="braille")
        self._axes(figure, [p for _, p in lines], width, height - FRAME_ROWS)
        return Text.from_ansi(figure.build(), no_wrap=True, end="")

    def _axes(
        self,
        figure: PlotextFigure,
        points: list[tuple[list[float], list[float]]],
        width: int,
        rows: int,
    ) -> None:
        """Round ticks an equal number of rows apart, whole steps on a step axis."""
        xs = [x for line_xs, _ in points for x in line_xs]
        ys = [y for _, line_ys in points for y in line_ys]
        x_low, x_high = self.x_range or (min(xs), max(xs))
        if x_high <= x_low:
            x_low, x_high = x_low - 1, x_high + 1
        figure.xlim(x_low, x_high)
        if self.x_ticks is not None:
            figure.xticks([t for t, _ in self.x_ticks], [label for _, label in self.x_ticks])
        else:
            ticks = nice_ticks(x_low, x_high, max(2, width // X_LABEL_CELLS), self.x_integer)
            figure.xticks(ticks, tick_labels(ticks))
        if self.y_range is not None:
            y_ticks, (y_low, y_high) = fixed_ticks(*self.y_range, rows), self.y_range
        elif self.log_y:
            y_low, y_high = min(ys), max(ys)
            y_ticks = log_ticks(y_low, y_high, max(2, rows // 2 + 1))
            y_low, y_high = min([y_low, *y_ticks]), max([y_high, *y_ticks])
        else:
            y_ticks, y_low, y_high = even_ticks(min(ys), max(ys), rows, max(2, rows // 2 + 1))
        figure.ylim(y_low, y_high)
        figure.yticks(y_ticks, log_labels(y_ticks) if self.log_y else tick_labels(y_ticks))


def _log10(points: tuple[list[float], list[float]]) -> tuple[list[float], list[float]]:
    """The points above zero, y as its log10 (a log axis drawn on a linear one)."""
    kept = [(x, math.log10(y)) for x, y in zip(*points, strict=True) if y > 0]
    return [x for x, _ in kept], [y for _, y in kept]


def decimate(
    xs: Sequence[float], ys: Sequence[float], buckets: int
) -> tuple[list[float], list[float]]:
    """At most `buckets` points: each bucket keeps its last x and its highest y.

    plotext's cost grows with the number of points (600 points took 20 to 35 ms a frame, 94
    took 6 and 47 took 4 on a 100-cell chart); the maximum keeps short peaks visible, which is
    what a person scanning a memory chart looks for.
    """
    if len(xs) <= buckets:
        return list(xs), list(ys)
    size = -(-len(xs) // buckets)
    out_x = [xs[min(i + size, len(xs)) - 1] for i in range(0, len(xs), size)]
    out_y = [max(ys[i : i + size]) for i in range(0, len(ys), size)]
    return out_x, out_y

"""The one widget that talks to plotext: a line chart drawn from plain series on each render."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plotext._figure import _figure_class as PlotextFigure  # plotext 5.x, pinned in pyproject
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from gpuherd.chart_values import drawable


@dataclass(frozen=True, slots=True)
class Series:
    """One line: x and y values of equal length, a legend label and a plotext colour name."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str


class Plot(Widget):
    """A line chart of `series`; each widget owns its own plotext figure.

    plotext's module-level API shares one global figure, so two charts (or a chart and a test)
    would draw into each other; a private figure, used only from `render`, avoids that.
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

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._figure = PlotextFigure()
        # plotext clamps a figure to the size of the terminal it thinks it runs in (80x24 when
        # stdout is not a tty, as under Textual); the widget's size is the only limit we want.
        self._figure._limit_size(False, False)
        self._figure.theme("clear")

    def render(self) -> RenderResult:
        """Draw the series at the widget's current size."""
        width, height = self.size.width, self.size.height
        # Values plotext cannot scale (a corrupt session's -5 % or 1e308) would raise inside
        # render, which Textual turns into a crash; they are drawn at the edge instead.
        lines = [(s, drawable(s.xs, s.ys, self.x_range, self.y_range)) for s in self.series]
        lines = [(s, points) for s, points in lines if points[0]]
        if not lines or width < 20 or height < 5:
            return Text(self.placeholder, style="dim")
        figure = self._figure
        # clear_data, not clear_figure: the latter re-creates the figure and re-reads the
        # terminal size, undoing the size limit set in __init__.
        figure.clear_data()
        figure.plotsize(width, height)
        for line, (line_xs, line_ys) in lines:
            # One point per two cells: lines between points still fill the braille dots.
            xs, ys = decimate(line_xs, line_ys, max(10, (width - 8) // 2))
            figure.plot(xs, ys, label=line.label, color=line.color, marker="braille")
        if self.x_range is not None:
            figure.xlim(*self.x_range)
        if self.y_range is not None:
            figure.ylim(*self.y_range)
            figure.yticks(_ticks(self.y_range))
        return Text.from_ansi(figure.build(), no_wrap=True, end="")


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
    out_y = [max(ys[i:i + size]) for i in range(0, len(ys), size)]
    return out_x, out_y


def _ticks(limits: tuple[float, float]) -> Sequence[float]:
    low, high = limits
    return [low, (low + high) / 2, high]

"""The plot widget with values plotext cannot scale: negative, huge, tiny, outside fixed limits."""

from __future__ import annotations

import math

import pytest
from rich.console import Console
from textual.app import App, ComposeResult

from tui.widgets.plot import Plot, Series

BRAILLE = range(0x2801, 0x2900)


class PlotApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Plot(id="plot")


def drawn(plot: Plot) -> str:
    console = Console(width=plot.size.width, record=True, color_system=None)
    console.print(plot.render())
    return console.export_text()


@pytest.mark.parametrize(
    ("ys", "x_range", "y_range"),
    [
        ((-5.0, 50.0, 250.0, 40.0), (-600.0, 0.0), (0.0, 100.0)),  # a GPU -5 % busy, VRAM 250 %
        ((1e308, 1.0, -1e308, 2.0), None, None),  # a log's loss=1e308
        ((1e-310, 2e-310, 1e-310, 0.0), None, None),  # and loss=1e-310
        ((math.nan, 3.0, math.inf, 4.0), None, None),
    ],
)
async def test_values_plotext_cannot_scale_are_drawn_at_the_edge(ys, x_range, y_range) -> None:
    app = PlotApp()
    async with app.run_test(size=(80, 20)) as pilot:
        plot = app.query_one(Plot)
        plot.x_range, plot.y_range = x_range, y_range
        plot.series = (Series("util %", (-30.0, -20.0, -10.0, 0.0), ys, "green"),)
        await pilot.pause()
        text = drawn(plot)
        assert "util %" in text and any(ord(c) in BRAILLE for c in text)
        if y_range is not None:
            assert "100" in text and "0" in text  # the fixed limits, not the data's


async def test_a_series_with_no_drawable_point_shows_the_placeholder() -> None:
    app = PlotApp()
    async with app.run_test(size=(80, 20)) as pilot:
        plot = app.query_one(Plot)
        plot.series = (Series("loss", (0.0, 1.0), (math.nan, math.inf), "red"),)
        await pilot.pause()
        assert drawn(plot).strip() == "no data yet"

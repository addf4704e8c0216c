"""Chart axes a person reads: round y ticks an equal number of rows apart, whole steps on a
step axis, a unit on the history chart, epochs that do not stack, a log scale for the loss."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.pilot import Pilot

from gpuherd.present.chart_values import even_ticks, nice_ticks
from gpuherd.tasks import TaskTracker
from tests.app.helpers import (
    T0,
    ScriptedCollector,
    gpu_source,
    host,
    host_source,
    scripted_log,
    until,
)
from tests.app.test_plot_values import PlotApp, drawn
from tests.app.test_snapshots import HISTORY, busy_ticks
from tests.app.test_snapshots_tasks import TRAIN, training
from tests.unit.test_tasks import TASK, batch, metric
from tui.app import GpuherdApp, make_app
from tui.screens.task_detail import TaskDetailScreen
from tui.tasks import chart_line
from tui.widgets.plot import Plot, Series


def detail_app() -> tuple[GpuherdApp, ScriptedCollector]:
    train = scripted_log(TRAIN)
    app = make_app([train], clock=lambda: T0 + HISTORY, hostname="box")
    return app, train


async def open_detail(pilot: Pilot[object], app: GpuherdApp, train: ScriptedCollector) -> None:
    """60 logged steps (val every 20) of one run, then its detail screen."""
    train.push(*training(TRAIN, 60))
    await until(
        pilot, lambda: (view := app.state.tasks.view(TRAIN)) is not None and view.step == 3000
    )
    await pilot.pause(0.5)  # the tasks panel's redraw
    await pilot.press("t", "enter")
    await until(
        pilot,
        lambda: (
            isinstance(app.screen, TaskDetailScreen)
            and bool(app.screen.query_one("#val-chart", Plot).series)
        ),
    )
    await pilot.pause()


Y_LABEL = re.compile(r"^\s*(-?[\d.e+-]+)┤")


def y_ticks(text: str) -> list[tuple[int, float]]:
    """(row, value) of every y tick label of a drawn chart."""
    out = []
    for row, line in enumerate(text.splitlines()):
        found = Y_LABEL.match(line.lstrip("│ "))
        if found:
            out.append((row, float(found.group(1))))
    return out


def x_labels(text: str) -> list[str]:
    """The words of the line under the x axis."""
    lines = text.splitlines()
    axis = next(i for i, line in enumerate(lines) if "└" in line)
    return lines[axis + 1].split()


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6), st.integers(3, 40))
def test_even_ticks_land_on_rows_equally_apart_and_cover_the_data(
    low: float, relative: float, rows: int
) -> None:
    high = low + relative * max(1.0, abs(low))  # a flat line of 1e5 +- 1e-11 is centred
    ticks, bottom, top = even_ticks(low, high, rows)
    tolerance = 1e-9 * (high - low)  # a tick may sit a rounding error inside the data
    assert bottom <= low + tolerance and top >= high - tolerance
    assert len(ticks) >= 2
    positions = [(t - bottom) / (top - bottom) * (rows - 1) for t in ticks]
    assert all(abs(p - round(p)) < 1e-6 for p in positions)
    gaps = {round(b - a) for a, b in zip(positions, positions[1:], strict=False)}
    assert len(gaps) == 1


@given(st.integers(0, 10**7), st.integers(1, 10**7), st.integers(2, 12))
def test_step_ticks_are_whole_numbers(first: int, span: int, most: int) -> None:
    ticks = nice_ticks(first, first + span, most, integer=True)
    assert 1 <= len(ticks) <= most and all(t == int(t) for t in ticks)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)])
async def test_the_task_charts_have_even_round_ticks_and_whole_steps(size: tuple[int, int]) -> None:
    app, train = detail_app()
    async with app.run_test(size=size) as pilot:
        await open_detail(pilot, app, train)
        for selector in ("#loss-chart", "#val-chart"):
            text = drawn(app.screen.query_one(selector, Plot))
            ticks = y_ticks(text)
            assert len(ticks) >= 2, text
            rows = [r for r, _ in ticks]
            values = [v for _, v in ticks]
            assert len({b - a for a, b in zip(rows, rows[1:], strict=False)}) == 1, text
            steps = {round(a - b, 9) for a, b in zip(values, values[1:], strict=False)}
            assert len(steps) == 1, text
            labels = x_labels(text)
            assert labels and all(label.isdigit() for label in labels), text  # whole steps


async def test_the_history_chart_says_its_unit() -> None:
    ticks = busy_ticks(30)
    app = make_app([gpu_source(*ticks), host_source(host())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.state.gpu_tick is ticks[-1])
        await pilot.pause()
        text = drawn(app.screen.query_one(Plot))
        assert x_labels(text) == ["-10", "min", "-5", "min", "now"]
        assert [v for _, v in y_ticks(text)] == [100.0, 50.0, 0.0]


def test_points_of_one_epoch_are_spread_across_it_not_stacked() -> None:
    tracker = TaskTracker()
    for epoch in range(3):
        for k in range(4):
            tracker.add_batch(
                batch(T0 + epoch * 4 + k, [metric(epoch=epoch, train__loss=2 - epoch / 2)])
            )
    line = chart_line(
        "train/loss",
        tracker.series(TASK, "train/loss"),
        "cyan",
        tracker.series_x_kind(TASK, "train/loss"),
    )
    assert line.xs == (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75)


async def test_l_puts_the_loss_on_a_log_scale_and_back() -> None:
    app, train = detail_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_detail(pilot, app, train)
        screen = app.screen
        chart = screen.query_one("#loss-chart", Plot)
        await pilot.press("l")
        await pilot.pause()
        assert chart.log_y and "log scale" in str(screen.query_one("#loss-box").border_title)
        values = [v for _, v in y_ticks(drawn(chart))]
        logs = [math.log10(v) for v in values]
        assert len(values) >= 2 and all(abs(x - round(x * 10) / 10) < 0.1 for x in logs)
        await pilot.press("l")
        await pilot.pause()
        assert not chart.log_y and "log" not in str(screen.query_one("#loss-box").border_title)
        assert TRAIN in app.state.tasks.task_ids


async def test_a_plot_of_one_point_still_draws() -> None:
    app = PlotApp()
    async with app.run_test(size=(60, 12)) as pilot:
        plot = app.query_one(Plot)
        plot.x_integer = True
        plot.series = (Series("loss", (5.0,), (2.0,), "cyan"),)
        await pilot.pause()
        assert "loss" in drawn(plot)

"""Snapshots of the dashboard with training-log tasks, and of one task's detail screen."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from textual.pilot import Pilot

from collectors.base import CollectorError
from collectors.roles import HOST
from collectors.samples import GpuProcess, LogBatch
from gpuherd.tasks.hints import TaskHint
from parsers.model import LogFinding, LogMetric
from tests.app.helpers import (
    T0,
    UUID0,
    GiB,
    ScriptedCollector,
    gpu,
    host,
    scripted_log,
    tick,
    until,
)
from tests.app.test_snapshots import HISTORY, busy_ticks
from tui.app import GpuherdApp, make_app
from tui.screens.task_detail import TaskDetailScreen
from tui.widgets.plot import Plot
from tui.widgets.tasks_panel import TasksPanel

TRAIN = "/runs/resnet50/train.log"
DETR = "/runs/detr/version_0/metrics.csv"
BROKEN = "/runs/old"


def training(path: str, steps: int, nan_at: int | None = None) -> list[LogBatch]:
    """One batch per logged step over the two recorded minutes, val every 20 steps."""
    batches = []
    for i in range(1, steps + 1):
        t = T0 + i * HISTORY / steps
        loss = float("nan") if nan_at is not None and i >= nan_at else 2.2 * math.exp(-i / 25)
        metrics = [
            (
                i,
                LogMetric(
                    (("train/loss", loss), ("throughput/it_s", 8.4)), step=i * 50, epoch=i // 20
                ),
            )
        ]
        if i % 20 == 0:
            metrics.append(
                (
                    i + 1000,
                    LogMetric((("val/loss", loss + 0.1), ("val/acc", 0.5 + i / 400)), step=i * 50),
                )
            )
        findings = ()
        if nan_at is not None and i == nan_at:
            findings = ((i, LogFinding("nan", f"loss=nan at iter {i * 50}")),)
        batches.append(
            LogBatch(
                path,
                t,
                "generic",
                tuple(metrics),
                findings,
                lines_read=len(metrics),
                generation=1,
                file_path=path,
            )
        )
    return batches


def tasks_app() -> tuple[GpuherdApp, Callable[[Pilot[object]], Awaitable[None]]]:
    gpus, hosts = ScriptedCollector("nvml"), ScriptedCollector("host", role=HOST)
    train, detr = scripted_log(TRAIN), scripted_log(DETR)
    broken = scripted_log(BROKEN)
    app = make_app(
        [gpus, hosts, train, detr, broken],
        clock=lambda: T0 + HISTORY,
        hostname="gpu-box-3",
        task_hints=[TaskHint(TRAIN, gpu_uuids=(UUID0,))],
    )

    async def feed(pilot: Pilot[object]) -> None:
        hosts.push(host(T0 + HISTORY))
        # One source after the other, so the rows come in a fixed order.
        train.push(*training(TRAIN, 60))
        await until(pilot, lambda: TRAIN in app.state.tasks.task_ids)
        detr.push(*training(DETR, 40, nan_at=36))
        await until(pilot, lambda: DETR in app.state.tasks.task_ids)
        broken.push(
            CollectorError(
                f"{BROKEN} is a directory, not a log file (use --watch {BROKEN})", title="log"
            )
        )
        await until(pilot, lambda: BROKEN in app.state.tasks.task_ids)
        for item in busy_ticks():  # one at a time: a newer tick would replace a waiting one
            gpus.push(item)
            await until(pilot, lambda item=item: app.state.gpu_tick is item)
        util = f"0 {item.devices[0].gpu_util_pct:.0f}%"  # the last tick's, once redrawn
        table = app.get_default_screen().query_one(TasksPanel)
        await until(
            pilot,
            lambda: (
                table.row_count == 3
                and "NaN" in str(table.get_cell(DETR, "health"))
                and "step 3,000" in str(table.get_cell(TRAIN, "progress"))
                and str(table.get_cell(TRAIN, "gpu")) == util
            ),
            timeout_s=30,
        )  # 120 ticks then a redraw: slow on a loaded 2-core runner
        app.clear_notifications()
        await pilot.pause()

    return app, feed


def test_tasks_panel(snap_compare: Callable[..., bool]) -> None:
    app, feed = tasks_app()
    assert snap_compare(app, terminal_size=(160, 50), run_before=feed)


def test_task_detail(snap_compare: Callable[..., bool]) -> None:
    app, feed = tasks_app()

    async def open_detail(pilot: Pilot[object]) -> None:
        await feed(pilot)
        await pilot.press("t", "enter")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen)
                and bool(app.screen.query_one("#val-chart", Plot).series)
            ),
        )
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 50), run_before=open_detail)


def test_eight_gpus_and_tasks_at_80x24(snap_compare: Callable[..., bool]) -> None:
    """Crowded: one line per GPU, the host on one line, a process row, then the tasks."""
    gpus, hosts = ScriptedCollector("nvml"), ScriptedCollector("host", role=HOST)
    train, detr = scripted_log(TRAIN), scripted_log(DETR)
    app = make_app(
        [gpus, hosts, train, detr],
        clock=lambda: T0 + HISTORY,
        hostname="gpu-box-3",
        task_hints=[TaskHint(TRAIN, gpu_uuids=(UUID0,))],
    )
    eight = tick(
        *(
            gpu(
                i,
                memory_used_bytes=(20 + 5 * i) * GiB,
                gpu_util_pct=10.0 * i + 20,
                processes=(GpuProcess(4200 + i, (19 + 5 * i) * GiB),),
            )
            for i in range(8)
        ),
        t=T0 + HISTORY,
    )

    async def feed(pilot: Pilot[object]) -> None:
        hosts.push(host(T0 + HISTORY))
        train.push(*training(TRAIN, 60))
        await until(pilot, lambda: TRAIN in app.state.tasks.task_ids)
        detr.push(*training(DETR, 40, nan_at=36))
        await until(pilot, lambda: DETR in app.state.tasks.task_ids)
        gpus.push(eight)
        table = app.get_default_screen().query_one(TasksPanel)
        await until(
            pilot,
            lambda: (
                app.state.gpu_tick is eight
                and table.row_count == 2
                and "NaN" in str(table.get_cell(DETR, "health"))
            ),
            timeout_s=30,
        )
        await pilot.pause(0.3)  # the tasks panel's next redraw (after the tick)
        app.clear_notifications()
        for widget in app.screen.walk_children(with_self=True):
            widget.refresh(layout=True)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=feed)

"""Snapshot tests of the main layouts, from fixed samples with a fixed clock and host name."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

import pytest
from textual.pilot import Pilot

from collectors.base import CollectorError
from collectors.roles import HOST
from collectors.samples import GpuProcess, GpuSample, GpuTick
from tests.app.helpers import (
    T0,
    UUID1,
    GiB,
    MiB,
    ScriptedCollector,
    gpu,
    host,
    tick,
    until,
)
from tui.app import GpuherdApp, make_app

HISTORY = 120


def busy_ticks(count: int = HISTORY) -> list[GpuTick]:
    """Two minutes of a training run on GPU 0; GPU 1 holds only the driver's reservation."""
    ticks = []
    for i in range(count):
        used = int((40 + 12 * math.sin(i / 9)) * GiB)
        util = round(70 + 25 * math.sin(i / 5))
        ticks.append(
            tick(
                gpu(
                    0,
                    memory_used_bytes=used,
                    gpu_util_pct=float(util),
                    processes=(GpuProcess(4242, used - 600 * MiB),),
                ),
                gpu(
                    1,
                    memory_used_bytes=615 * MiB,
                    gpu_util_pct=0.0,
                    processes=(),
                    power_w=71.0,
                    temperature_c=31.0,
                    sm_clock_mhz=345,
                ),
                t=T0 + i,
            )
        )
    return ticks


def scripted_app(
    items: Sequence[object], *, replay_label: str | None = None
) -> tuple[GpuherdApp, Callable[[Pilot[object]], Awaitable[None]]]:
    """An app fed `items` one message at a time (so no tick is merged away), plus a host sample."""
    gpus, hosts = ScriptedCollector("nvml"), ScriptedCollector("host", role=HOST)
    app = make_app(
        [gpus, hosts], clock=lambda: T0 + HISTORY, hostname="gpu-box-3", replay_label=replay_label
    )

    async def feed(pilot: Pilot[object]) -> None:
        hosts.push(host(T0 + HISTORY))
        await until(pilot, lambda: app.state.host_sample is not None)
        for item in items:
            gpus.push(item)
            await until(pilot, lambda item=item: _shown(app, item))
        # The sources stay open (a finished live source would read as "ended"); the app
        # cancels their workers when the snapshot is taken. Toasts are dropped: where a toast
        # lands depends on when it was laid out, and the Pilot tests check what they say.
        app.clear_notifications()
        # Repaint everything from scratch: which border segments were cached by earlier partial
        # frames depends on timing, and the snapshot compares segments, not just pixels.
        for widget in app.screen.walk_children(with_self=True):
            widget.refresh(layout=True)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    return app, feed


def _shown(app: GpuherdApp, item: object) -> bool:
    if isinstance(item, CollectorError):
        status = app.state.status.get("nvml")
        return status is not None and status.reason == item.msg
    return app.state.gpu_tick is item


@pytest.mark.parametrize("size", [(160, 50), (80, 24)], ids=["160x50", "80x24"])
def test_normal(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    app, feed = scripted_app(busy_ticks())
    assert snap_compare(app, terminal_size=size, run_before=feed)


def test_unknown_fields_read_na(snap_compare: Callable[..., bool]) -> None:
    bare = gpu(
        0,
        name="NVIDIA GeForce GTX 1080",
        temperature_c=None,
        power_w=None,
        power_limit_w=None,
        sm_clock_mhz=None,
        mem_util_pct=None,
        pstate=None,
        ecc_errors_corrected=None,
        ecc_errors_uncorrected=None,
        mig_mode=None,
        memory_reserved_bytes=None,
        mem_clock_mhz=None,
        processes=(GpuProcess(4242, None), GpuProcess(777, 2 * GiB)),
    )
    app, feed = scripted_app([tick(bare)])
    assert snap_compare(app, terminal_size=(120, 40), run_before=feed)


def test_lost_gpu(snap_compare: Callable[..., bool]) -> None:
    ticks: list[object] = list(busy_ticks(30))
    last = busy_ticks(31)[-1]
    lost = GpuSample(index=1, uuid=UUID1, name="NVIDIA H200", error="GPU is lost")
    ticks.append(
        GpuTick(
            last.taken_at,
            (last.devices[0], lost),
            last.driver_version,
            last.nvml_version,
            last.cuda_driver_version,
        )
    )
    app, feed = scripted_app(ticks)
    assert snap_compare(app, terminal_size=(120, 40), run_before=feed)


def test_collector_failing(snap_compare: Callable[..., bool]) -> None:
    items: list[object] = list(busy_ticks(30))
    items.append(CollectorError("NVML stopped answering: Unknown Error", title="NVML"))
    app, feed = scripted_app(items, replay_label=None)
    assert snap_compare(app, terminal_size=(120, 40), run_before=feed)

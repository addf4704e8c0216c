"""The process table's sort keys: each one's direction, its tie order and where unknowns go.

Six processes on two GPUs are chosen so that every key gives a different order, two rows tie on
memory and on CPU, and one row knows nothing but its pid and memory.
"""

from __future__ import annotations

import pytest

from collectors.samples import GpuProcess, ProcessInfo
from tests.app.helpers import (
    T0,
    UUID0,
    UUID1,
    MiB,
    collectors_done,
    gpu,
    gpu_source,
    host,
    host_source,
    tick,
)
from tui.app import make_app
from tui.processes import SORT_KEYS, ProcessRow, next_sort_key, sort_rows
from tui.widgets.process_table import ProcessTable, visible_keys

# pid, GPU, GPU memory (MiB), CPU %, RSS (MiB), elapsed (s), user
PROCESSES = [
    (10, 1, 8, 5.0, 1, 100.0, "carol"),
    (20, 0, 2, 90.0, 6, 5000.0, "alice"),
    (30, 0, 6, 40.0, 3, 10.0, "bob"),
    (40, 1, 1, None, None, None, None),
    (5, 1, 3, 20.0, 9, 700.0, "dave"),
    (50, 0, 3, 20.0, None, None, "alice"),
]
EXPECTED = {
    # descending; ties (50 and 5 on memory and CPU) in GPU-then-pid order; unknowns last
    "gpu_memory": [10, 30, 50, 5, 20, 40],
    "cpu": [20, 30, 50, 5, 10, 40],
    "rss": [5, 20, 30, 10, 50, 40],
    "elapsed": [20, 5, 10, 30, 50, 40],  # the longest-running first
    # ascending
    "pid": [5, 10, 20, 30, 40, 50],
    "user": [20, 50, 30, 10, 5, 40],
    "gpu": [30, 50, 20, 10, 5, 40],  # GPU 0 then 1, each by memory, most first
}


def rows() -> list[ProcessRow]:
    return [
        ProcessRow(
            f"GPU-{g}/{pid}",
            g,
            f"GPU-{g}",
            pid,
            mem * MiB,
            user,
            cpu,
            None if rss is None else rss * MiB,
            elapsed,
        )
        for pid, g, mem, cpu, rss, elapsed, user in PROCESSES
    ]


@pytest.mark.parametrize("key", SORT_KEYS, ids=lambda k: k.name)
def test_each_key_orders_the_processes(key) -> None:
    assert [r.pid for r in sort_rows(rows(), key)] == EXPECTED[key.name]


@pytest.mark.parametrize("key", SORT_KEYS, ids=lambda k: k.name)
def test_the_order_does_not_depend_on_the_input_order(key) -> None:
    assert [r.pid for r in sort_rows(reversed(rows()), key)] == EXPECTED[key.name]


def test_the_cycle_visits_every_key_once_in_this_order() -> None:
    key, seen = SORT_KEYS[0], []
    for _ in SORT_KEYS:
        seen.append((key.name, key.descending))
        key = next_sort_key(key)
    assert seen == [
        ("gpu_memory", True),
        ("cpu", True),
        ("rss", True),
        ("elapsed", True),
        ("pid", False),
        ("user", False),
        ("gpu", False),
    ]
    assert key == SORT_KEYS[0]


async def test_the_dashboard_shows_elapsed_and_gpu_orders() -> None:
    devices = (
        gpu(0, processes=(GpuProcess(20, 2 * MiB), GpuProcess(30, 6 * MiB))),
        gpu(1, processes=(GpuProcess(10, 8 * MiB), GpuProcess(5, 3 * MiB))),
    )
    infos = tuple(
        ProcessInfo(pid, user, "python x.py", cpu, rss * MiB, T0 - elapsed)
        for pid, _, _, cpu, rss, elapsed, user in PROCESSES[:5]
        if pid != 40
    )
    app = make_app(
        [gpu_source(tick(*devices)), host_source(host(processes=infos))], clock=lambda: T0
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        subtitle = app.screen.query_one("#processes")
        await pilot.press("s", "s", "s")  # GPU memory -> CPU -> RSS -> elapsed
        assert subtitle.border_subtitle.startswith("sort: elapsed ▼")
        assert visible_keys(table) == [f"{UUID0}/20", f"{UUID1}/5", f"{UUID1}/10", f"{UUID0}/30"]
        await pilot.press("s", "s", "s")  # pid, user, GPU
        assert subtitle.border_subtitle.startswith("sort: GPU ▲")
        assert visible_keys(table) == [f"{UUID0}/30", f"{UUID0}/20", f"{UUID1}/10", f"{UUID1}/5"]

"""Fixed samples, a step-by-step collector and a wait helper for the dashboard tests."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from textual.pilot import Pilot

from collectors.base import SourceExhausted
from collectors.roles import GPU, HOST, LOG
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from tests.fakes import FakeCollector
from tui.app import GpuherdApp
from tui.messages import CollectorEventReceived

E = TypeVar("E")

GiB = 1 << 30
MiB = 1 << 20
T0 = 1_764_130_000.0
"""A fixed Unix time for every sample (2025-11-26 04:06:40 UTC)."""
UUID0 = "GPU-1a2b3c4d-0000-1111-2222-333344445555"
UUID1 = "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"


def gpu(index: int = 0, **fields: object) -> GpuSample:
    base: dict[str, object] = dict(
        index=index,
        uuid=UUID0 if index == 0 else UUID1 if index == 1 else f"GPU-{index:08d}-x",
        name="NVIDIA H200",
        memory_used_bytes=int(45.5 * GiB),
        memory_total_bytes=int(139.8 * GiB),
        memory_reserved_bytes=512 * MiB,
        gpu_util_pct=87.0,
        mem_util_pct=45.0,
        temperature_c=64.0,
        power_w=312.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        mem_clock_mhz=3201,
        fan_pct=None,
        pstate=0,
        ecc_errors_corrected=0,
        ecc_errors_uncorrected=0,
        mig_mode=False,
        processes=(GpuProcess(4242, 30 * GiB), GpuProcess(5151, 15 * GiB)),
    )
    base.update(fields)
    return GpuSample(**base)  # type: ignore[arg-type]


def tick(*devices: GpuSample, t: float = T0) -> GpuTick:
    return GpuTick(t, tuple(devices) or (gpu(0),), "580.159.04", "13.580.159.04", "13.0")


def host(t: float = T0, processes: tuple[ProcessInfo, ...] | None = None) -> HostSample:
    if processes is None:
        processes = (
            ProcessInfo(
                4242,
                "alice",
                "python train.py --model llama-8b --bs 32",
                101.5,
                12 * GiB,
                T0 - 3725.0,
            ),
            ProcessInfo(5151, "bob", "python finetune.py", 12.0, 3 * GiB, T0 - 65.0),
        )
    return HostSample(
        taken_at=t,
        cpu_pct=23.0,
        cpu_count=64,
        mem_used_bytes=120 * GiB,
        mem_total_bytes=512 * GiB,
        swap_used_bytes=0,
        swap_total_bytes=8 * GiB,
        load_1m=1.2,
        load_5m=1.05,
        load_15m=0.9,
        disk_read_bytes_s=1.5 * MiB,
        disk_write_bytes_s=3 * MiB,
        net_rx_bytes_s=12 * MiB,
        net_tx_bytes_s=1 * MiB,
        processes=processes,
    )


def gpu_source(*samples: object, name: str = "nvml") -> FakeCollector:
    return FakeCollector(samples=list(samples), name=name, interval_s=0, role=GPU)


def host_source(*samples: object) -> FakeCollector:
    return FakeCollector(samples=list(samples), name="host", interval_s=0, role=HOST)


def scripted_log(path: str) -> ScriptedCollector:
    """A tail of `path` driven by the test: role `log`, one task."""
    return ScriptedCollector(f"log:{path}", role=LOG, task_id=path)


class ScriptedCollector:
    """A collector the test drives step by step: each `push` becomes the next `sample()` result.

    `sample()` waits for the next pushed item (an exception is raised), so the test decides
    exactly when the dashboard sees a failure or a recovery. `finish()` ends the source, and so
    does the app stopping its thread on exit (`wake()`).
    """

    def __init__(
        self, name: str = "nvml", role: str | None = GPU, task_id: str | None = None
    ) -> None:
        self.name = name
        self.role = role
        self.task_id = task_id
        self.interval_s = 0.0
        self._items: queue.Queue[object] = queue.Queue()
        self._done = threading.Event()
        self._woken = threading.Event()

    def push(self, *items: object) -> None:
        for item in items:
            self._items.put(item)

    def finish(self) -> None:
        self._done.set()

    def wake(self) -> None:
        """Called by whoever stops this collector's thread: end the source."""
        self._woken.set()

    def open(self) -> None:
        pass

    def sample(self) -> object:
        # Give up after a while so a test that forgets `finish()` cannot hang the worker thread;
        # well after any test's own wait, so a slow machine never sees a source end early.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                item = self._items.get(timeout=0.02)
            except queue.Empty:
                if self._done.is_set() or time.monotonic() > deadline or self._woken.is_set():
                    raise SourceExhausted(f"{self.name}: finished") from None
                continue
            if isinstance(item, BaseException):
                raise item
            return item

    def close(self) -> None:
        self._done.set()


def events(messages: Iterable[object], kind: type[E]) -> list[E]:
    """The collector events of type `kind` that reached the app, in order."""
    return [
        m.event
        for m in messages
        if isinstance(m, CollectorEventReceived) and isinstance(m.event, kind)
    ]


async def collectors_done(pilot: Pilot[object], app: GpuherdApp, timeout_s: float = 30) -> None:
    """Wait for every collector thread of `app` to end (finite fakes), then for its messages."""
    await until(pilot, lambda: not app.threads.alive(), timeout_s)
    await pilot.pause()


async def until(pilot: Pilot[object], condition: Callable[[], bool], timeout_s: float = 30) -> None:
    """Let the app run until `condition()` holds; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.01)

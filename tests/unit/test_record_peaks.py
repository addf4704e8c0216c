"""Peak tracking between rows, per-run attribution, and the fast sampler thread over FakeNvml."""

from __future__ import annotations

import os
import subprocess
import threading
import time

from collectors.base import Failed, Recovered, Unavailable
from collectors.machine.nvml import NvmlMemoryProbe, ProcessEntry
from collectors.samples import GpuProcess, GpuSample, GpuTick
from gpuherd.proc.tree import ProcessTree
from gpuherd.record.peaks import (
    BASELINE,
    PER_PROCESS,
    PeakSampler,
    PeakTracker,
)
from tests.fakes import FakeGpu, FakeNvml, GpuIsLost, LibraryNotFound, MiB, Uninitialized
from tests.fakes import GiB as GIB


def tick(
    t: float, *used: int | None, processes: dict[int, tuple[GpuProcess, ...]] | None = None
) -> GpuTick:
    processes = processes or {}
    return GpuTick(
        t,
        tuple(
            GpuSample(
                i, f"GPU-{i}", "NVIDIA H200", memory_used_bytes=u, processes=processes.get(i, ())
            )
            for i, u in enumerate(used)
        ),
    )


class StaticTree(ProcessTree):
    """A process tree that answers from a fixed set (pids from a tick need not exist here)."""

    def __init__(self, pids: set[int]) -> None:
        super().__init__(-1)
        self.pids = pids

    def contains(self, pid: int) -> bool:
        return pid in self.pids


def test_take_returns_the_highest_reading_since_the_last_row_and_resets() -> None:
    tracker = PeakTracker()
    for used in (1 * GIB, 21 * GIB, 2 * GIB):
        tracker.observe([used, 5 * GIB])
    assert tracker.take(tick(1.0, 2 * GIB, 5 * GIB)) == {"GPU-0": 21 * GIB, "GPU-1": 5 * GIB}
    # After the reset only newer readings count; the row's own reading is one of them.
    tracker.observe([3 * GIB, None])
    assert tracker.take(tick(2.0, 2 * GIB, 6 * GIB)) == {"GPU-0": 3 * GIB, "GPU-1": 6 * GIB}


def test_a_gpu_with_no_reading_has_no_peak() -> None:
    tracker = PeakTracker()
    tracker.observe([None, 4 * GIB])
    assert tracker.take(tick(1.0, None, None)) == {"GPU-1": 4 * GIB}


def test_run_peak_per_process_when_the_driver_lists_the_commands_pids() -> None:
    tracker = PeakTracker()
    tracker.observe([10 * GIB])  # another user holds 10 GiB before the command starts
    tracker.start_run(100, StaticTree({100, 101}))
    others = GpuProcess(7, 10 * GIB)
    ours = (GpuProcess(100, 3 * GIB), GpuProcess(101, 1 * GIB))
    tracker.take(tick(1.0, 14 * GIB, processes={0: (others, *ours)}))
    # A spike between rows: the device reads 34 GiB; others still hold 10.
    tracker.observe([34 * GIB], taken_at=1.5)
    tracker.take(tick(2.0, 14 * GIB, processes={0: (others, *ours)}))
    [peak] = tracker.run_peaks()
    assert (peak.method, peak.peak_bytes, peak.at, peak.baseline_bytes) == (
        PER_PROCESS,
        24 * GIB,
        1.5,
        10 * GIB,
    )


def test_run_peak_falls_back_to_baseline_and_says_so() -> None:
    tracker = PeakTracker()
    tracker.observe([615 * MiB, 2 * GIB])
    tracker.start_run(100, StaticTree({100}))
    # The driver lists pids of another namespace: none of them is ours.
    foreign = {0: (GpuProcess(9_999_999, 5 * GIB),)}
    tracker.observe([615 * MiB + 8 * GIB, 2 * GIB], taken_at=3.0)
    tracker.take(tick(4.0, 615 * MiB + 5 * GIB, 2 * GIB, processes=foreign))
    peaks = tracker.run_peaks()
    assert [p.index for p in peaks] == [0]  # GPU 1 never grew
    assert peaks[0].method == BASELINE
    assert peaks[0].peak_bytes == 8 * GIB
    assert peaks[0].baseline_bytes == 615 * MiB


def test_per_process_attribution_leaves_out_gpus_the_command_never_used() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB, GIB])
    tracker.start_run(1, StaticTree({1}))
    tracker.observe([5 * GIB, 9 * GIB])  # GPU 1 grows because of someone else
    tracker.take(
        tick(
            1.0,
            5 * GIB,
            9 * GIB,
            processes={0: (GpuProcess(1, 4 * GIB),), 1: (GpuProcess(2, 8 * GIB),)},
        )
    )
    assert [(p.index, p.method) for p in tracker.run_peaks()] == [(0, PER_PROCESS)]


def test_no_run_peaks_without_a_command() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB])
    tracker.take(tick(1.0, GIB))
    assert tracker.run_peaks() == ()


def test_process_tree_finds_grandchildren_and_not_strangers() -> None:
    # A real process tree: bash starts a sleep in the background and waits for it.
    child = subprocess.Popen(
        ["bash", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        tree = ProcessTree(child.pid)
        assert tree.contains(child.pid)
        assert tree.contains(grandchild)
        assert not tree.contains(os.getpid())
        assert not tree.contains(1)
        assert not tree.contains(2**22 + 12345)  # no such pid
    finally:
        subprocess.run(["pkill", "-P", str(child.pid)], check=False)
        child.kill()
        child.wait()


def test_sampler_catches_a_spike_shorter_than_a_row() -> None:
    fake = FakeNvml([FakeGpu(used=2 * GIB, reserved=0)])
    tracker = PeakTracker()
    events: list[object] = []
    sampler = PeakSampler(NvmlMemoryProbe(fake, interval_s=0.005), tracker, events.append)
    sampler.start()
    try:
        assert sampler.wait_first(5.0)
        tracker.take(tick(0.0, 2 * GIB))
        fake.gpus[0].used = 22 * GIB
        deadline = time.monotonic() + 5
        start = tracker.readings
        while tracker.readings < start + 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        fake.gpus[0].used = 2 * GIB
        peaks = tracker.take(tick(1.0, 2 * GIB))
    finally:
        sampler.stop()
    assert peaks == {"GPU-0": 22 * GIB}
    assert events == []


def test_sampler_reports_failures_and_recovery() -> None:
    fake = FakeNvml([FakeGpu()])
    events: list[object] = []
    seen = threading.Event()

    def on_event(event: object) -> None:
        events.append(event)
        if isinstance(event, Recovered):
            seen.set()

    sampler = PeakSampler(NvmlMemoryProbe(fake, interval_s=0.002), PeakTracker(), on_event)
    fake.fail(0, "memory_info_v2", Uninitialized, times=3)
    sampler.start()
    try:
        assert seen.wait(5.0)
    finally:
        sampler.stop()
    assert isinstance(events[0], Failed) and "NVML stopped working" in events[0].error.msg
    assert isinstance(events[-1], Recovered)


def test_a_lost_gpu_only_misses_its_own_readings() -> None:
    fake = FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", used=7 * GIB, reserved=0)])
    probe = NvmlMemoryProbe(fake)
    probe.open()
    try:
        fake.fail(0, "memory_info_v2", GpuIsLost)
        assert probe.sample() == (None, 7 * GIB)
    finally:
        probe.close()


def test_sampler_without_a_driver_says_why() -> None:
    fake = FakeNvml()
    fake.fail(None, "init", LibraryNotFound)
    events: list[object] = []
    sampler = PeakSampler(NvmlMemoryProbe(fake), PeakTracker(), events.append)
    sampler.start()
    assert not sampler.wait_first(2.0)
    sampler.stop()
    assert isinstance(events[0], Unavailable)
    assert sampler.unavailable is not None and "NVIDIA driver not found" in sampler.unavailable


def test_process_entries_from_the_fake_reach_attribution() -> None:
    # The real 1 Hz collector over FakeNvml lists our own pid: per-process attribution.
    from collectors.machine.nvml import NvmlCollector

    fake = FakeNvml([FakeGpu(used=GIB, reserved=0)])
    collector = NvmlCollector(fake)
    collector.open()
    try:
        tracker = PeakTracker()
        tracker.observe([GIB])
        tracker.start_run(os.getpid())
        fake.gpus[0].used = 5 * GIB
        fake.gpus[0].compute = [ProcessEntry(os.getpid(), 4 * GIB), ProcessEntry(1, GIB)]
        tracker.take(collector.sample())
    finally:
        collector.close()
    [peak] = tracker.run_peaks()
    assert (peak.method, peak.peak_bytes) == (PER_PROCESS, 4 * GIB)


def test_sleeping_stop_is_noticed_after_the_current_sleep() -> None:
    from gpuherd.record.peaks import SleepingStop

    stop = SleepingStop()
    began = time.monotonic()
    assert stop.wait(0.05) is False
    assert time.monotonic() - began >= 0.05
    threading.Timer(0.05, stop.set).start()
    assert stop.wait() is True  # no timeout: returns as soon as it is set
    assert stop.wait(10) is True and time.monotonic() - began < 5


def test_final_tick_carries_pending_peaks_after_the_last_row() -> None:
    tracker = PeakTracker()
    assert tracker.final_tick() is None  # no row yet: nothing to base it on
    tracker.observe([GIB, 2 * GIB], taken_at=0.5)
    tracker.take(tick(1.0, GIB, 2 * GIB))
    assert tracker.final_tick() is None  # nothing read since the last row
    tracker.observe([9 * GIB, None], taken_at=1.4)
    tracker.observe([3 * GIB, None], taken_at=1.6)
    final = tracker.final_tick()
    assert final is not None and final.taken_at == 1.6
    assert [(d.index, d.memory_used_bytes) for d in final.devices] == [(0, 3 * GIB)]
    assert tracker.take(final) == {"GPU-0": 9 * GIB}

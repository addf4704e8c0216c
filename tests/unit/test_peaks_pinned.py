"""Peak attribution edge cases that change the number a verification note quotes.

An unknown per-process memory is not 0 bytes, the last fast readings keep the newest time, and a
pid the kernel hands out again belongs to whoever holds it now (checked in a private pid
namespace where the test decides which pid the next process gets).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from collectors.base import Crashed, SourceExhausted
from collectors.samples import GpuProcess, GpuSample, GpuTick
from gpuherd.record.peaks import BASELINE, PER_PROCESS, PeakSampler, PeakTracker
from tests.fakes import GiB as GIB
from tests.unit.test_record_peaks import StaticTree, tick

REPO = Path(__file__).resolve().parents[2]
OTHERS = GpuProcess(7, 10 * GIB)


def test_an_unknown_process_memory_is_not_read_as_zero() -> None:
    tracker = PeakTracker()
    tracker.observe([10 * GIB])  # another user holds 10 GiB before the command starts
    tracker.start_run(100, StaticTree({100, 101}))
    # The driver lists both of the command's processes but cannot say what one of them holds:
    # the command's memory on this tick is unknown, so the device minus the baseline is used.
    ours = (GpuProcess(100, 3 * GIB), GpuProcess(101, None))
    tracker.take(tick(1.0, 14 * GIB, processes={0: (OTHERS, *ours)}))
    tracker.observe([34 * GIB], taken_at=1.5)
    [peak] = tracker.run_peaks()
    # Reading the None as 0 would give PER_PROCESS with 34 - (14 - 3) = 23 GiB.
    assert (peak.method, peak.peak_bytes, peak.at, peak.baseline_bytes) == (
        BASELINE,
        24 * GIB,
        1.5,
        10 * GIB,
    )


def test_per_process_memory_is_summed_over_the_commands_processes() -> None:
    tracker = PeakTracker()
    tracker.observe([10 * GIB])
    tracker.start_run(100, StaticTree({100, 101}))
    ours = (GpuProcess(100, 3 * GIB), GpuProcess(101, 1 * GIB))
    tracker.take(tick(1.0, 14 * GIB, processes={0: (OTHERS, *ours)}))
    [peak] = tracker.run_peaks()
    assert (peak.method, peak.peak_bytes, peak.at) == (PER_PROCESS, 4 * GIB, 1.0)
    # others now hold 14 - 4 = 10 GiB: a fast reading of 15 GiB is 5 GiB of the command's
    tracker.observe([15 * GIB], taken_at=1.2)
    [peak] = tracker.run_peaks()
    assert (peak.peak_bytes, peak.at) == (5 * GIB, 1.2)
    # a lower reading later does not lower the peak, an equal one does not move its time
    tracker.observe([12 * GIB], taken_at=1.3)
    tracker.observe([15 * GIB], taken_at=1.4)
    [peak] = tracker.run_peaks()
    assert (peak.peak_bytes, peak.at) == (5 * GIB, 1.2)


def test_the_final_tick_takes_the_newest_fast_reading_time_of_all_gpus() -> None:
    tracker = PeakTracker()
    tracker.take(tick(1.0, GIB, GIB))
    tracker.observe([9 * GIB, 2 * GIB], taken_at=1.4)
    tracker.observe([None, 3 * GIB], taken_at=1.8)  # GPU 0 has no reading this time
    final = tracker.final_tick()
    assert final is not None and final.taken_at == 1.8
    assert [(d.index, d.uuid, d.memory_used_bytes) for d in final.devices] == [
        (0, "GPU-0", 9 * GIB),
        (1, "GPU-1", 3 * GIB),
    ]
    assert tracker.take(final) == {"GPU-0": 9 * GIB, "GPU-1": 3 * GIB}


def test_a_final_tick_is_never_older_than_the_last_row() -> None:
    # Readings stamped before the last row (a late row) still get a time of their own after it:
    # rows with the same `t` form one tick.
    tracker = PeakTracker()
    tracker.take(tick(1.0, GIB))
    tracker.observe([5 * GIB], taken_at=0.9)
    final = tracker.final_tick()
    assert final is not None and final.taken_at == 1.001


RECYCLE = textwrap.dedent("""
    import subprocess, time
    from gpuherd.proc.tree import ProcessTree

    # This process is pid 1 of a new pid namespace: no other process forks in it, so the
    # test decides which pid the next process gets (ns_last_pid + 1).
    command = subprocess.Popen(["sh", "-c", "read go; sleep 60 & echo $!; wait"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tree = ProcessTree(command.pid)
    stranger = subprocess.Popen(["sleep", "60"])
    pid = stranger.pid
    print("stranger", tree.contains(pid))
    stranger.kill()
    stranger.wait()
    time.sleep(0.05)  # start times are counted in 10 ms clock ticks: make them differ
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    command.stdin.write("go\\n")
    command.stdin.flush()
    child = int(command.stdout.readline())
    print("same pid", child == pid)
    print("child", tree.contains(pid))
    command.kill()
""")


def test_a_recycled_pid_is_asked_about_again() -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    # As root a pid namespace needs no user namespace; as anyone else it does.
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    out = subprocess.run(
        [unshare, *user, "--pid", "--fork", "--mount-proc", sys.executable, "-c", RECYCLE],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    if out.returncode != 0 and "unshare failed" in out.stderr:
        pytest.skip(f"no private pid namespace here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    # the pid first held by a stranger, then by the command's child
    assert out.stdout.splitlines() == ["stranger False", "same pid True", "child True"]


# --- cases found by mutation testing (benchmarks/mutation.py) ---------------------------------


def full_tick(t: float, *used: int | None, processes=None) -> GpuTick:
    """A tick with everything a real 1 Hz row carries: totals and driver versions."""
    processes = processes or {}
    return GpuTick(
        t,
        tuple(
            GpuSample(
                i,
                f"GPU-{i}",
                "NVIDIA H200",
                memory_used_bytes=u,
                memory_total_bytes=140 * GIB,
                processes=processes.get(i, ()),
            )
            for i, u in enumerate(used)
        ),
        "580.159.04",
        "13.580.159.04",
        "13.0",
    )


def test_the_final_tick_keeps_totals_and_versions_of_the_last_row() -> None:
    tracker = PeakTracker()
    tracker.take(full_tick(1.0, GIB))
    tracker.observe([5 * GIB], taken_at=1.5)
    final = tracker.final_tick()
    assert final is not None
    assert (final.driver_version, final.nvml_version, final.cuda_driver_version) == (
        "580.159.04",
        "13.580.159.04",
        "13.0",
    )
    assert [(d.name, d.memory_used_bytes, d.memory_total_bytes) for d in final.devices] == [
        ("NVIDIA H200", 5 * GIB, 140 * GIB)
    ]


def test_readings_before_the_first_row_give_no_final_tick() -> None:
    tracker = PeakTracker()
    tracker.observe([5 * GIB], taken_at=0.5)
    assert tracker.final_tick() is None  # nothing to take the GPUs' names and totals from


def test_without_a_command_nothing_is_attributed() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB], taken_at=0.5)
    tracker.observe([3 * GIB], taken_at=0.7)
    tracker.take(full_tick(1.0, 3 * GIB, processes={0: (GpuProcess(100, 2 * GIB),)}))
    assert tracker.run_peaks() == ()


def test_a_final_reading_at_the_time_of_the_last_row_gets_a_later_time() -> None:
    tracker = PeakTracker()
    tracker.take(full_tick(1.0, GIB))
    tracker.observe([5 * GIB], taken_at=1.0)
    final = tracker.final_tick()
    assert final is not None and final.taken_at == 1.001


def test_readings_without_a_time_take_the_clock() -> None:
    tracker = PeakTracker(clock=lambda: 7.25)
    tracker.observe([GIB])
    tracker.start_run(1, StaticTree({1}))
    tracker.observe([3 * GIB])
    [peak] = tracker.run_peaks()
    assert (peak.peak_bytes, peak.at, peak.uuid) == (2 * GIB, 7.25, None)  # no row: no uuid
    assert tracker.readings == 2


def test_a_trace_keeps_every_reading_only_when_asked() -> None:
    assert PeakTracker().trace is None
    tracker = PeakTracker(trace=True)
    tracker.observe([GIB, None], taken_at=1.0)
    tracker.observe([2 * GIB, 3 * GIB], taken_at=1.1)
    assert tracker.trace is not None and tracker.trace.maxlen == 1_000_000
    assert list(tracker.trace) == [(1.0, (GIB, None)), (1.1, (2 * GIB, 3 * GIB))]


def test_run_peaks_carry_each_gpus_uuid_and_skip_only_idle_gpus() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB, GIB, GIB])
    tracker.start_run(1, StaticTree({1}))
    tracker.observe([GIB, GIB, 4 * GIB], taken_at=2.0)  # only GPU 2 grows
    tracker.take(
        GpuTick(
            3.0,
            tuple(
                GpuSample(i, f"GPU-uuid-{i}", "NVIDIA H200", memory_used_bytes=GIB, processes=None)
                for i in range(3)
            ),
        )
    )
    assert [(p.index, p.uuid, p.peak_bytes, p.at) for p in tracker.run_peaks()] == [
        (2, "GPU-uuid-2", 3 * GIB, 2.0)
    ]


def test_a_command_that_starts_before_any_reading_is_measured_from_the_first() -> None:
    tracker = PeakTracker()
    tracker.start_run(1, StaticTree({1}))
    tracker.observe([2 * GIB], taken_at=1.0)  # the first reading is the baseline
    tracker.observe([5 * GIB], taken_at=2.0)
    [peak] = tracker.run_peaks()
    assert (peak.method, peak.peak_bytes, peak.at, peak.baseline_bytes) == (
        BASELINE,
        3 * GIB,
        2.0,
        2 * GIB,
    )


def test_a_one_byte_growth_is_a_peak() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB])
    tracker.start_run(1, StaticTree({1}))
    tracker.observe([GIB + 1], taken_at=1.0)
    assert [p.peak_bytes for p in tracker.run_peaks()] == [1]


def test_per_process_memory_above_the_baseline_fall_gives_the_tick_time() -> None:
    # Others held 10 GiB at the start and now hold 8: the command's 6 GiB (from the driver's
    # process list) beats the 14 - 10 = 4 GiB the device reading alone suggests.
    tracker = PeakTracker()
    tracker.observe([10 * GIB], taken_at=0.5)
    tracker.start_run(100, StaticTree({100}))
    tracker.take(
        full_tick(1.0, 14 * GIB, processes={0: (GpuProcess(7, 8 * GIB), GpuProcess(100, 6 * GIB))})
    )
    [peak] = tracker.run_peaks()
    assert (peak.method, peak.peak_bytes, peak.at) == (PER_PROCESS, 6 * GIB, 1.0)


def test_a_process_holding_zero_bytes_adds_zero() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB])
    tracker.start_run(100, StaticTree({100, 101}))
    tracker.take(
        full_tick(1.0, 3 * GIB, processes={0: (GpuProcess(100, 2 * GIB), GpuProcess(101, 0))})
    )
    # others now hold exactly 1 GiB: a fast reading of 4 GiB is 3 GiB of the command's
    tracker.observe([4 * GIB], taken_at=1.5)
    [peak] = tracker.run_peaks()
    assert (peak.peak_bytes, peak.at) == (3 * GIB, 1.5)


def test_when_the_command_holds_all_memory_others_hold_zero() -> None:
    tracker = PeakTracker()
    tracker.observe([0])
    tracker.start_run(100, StaticTree({100}))
    tracker.take(full_tick(1.0, 2 * GIB, processes={0: (GpuProcess(100, 2 * GIB),)}))
    tracker.observe([5 * GIB], taken_at=1.5)
    [peak] = tracker.run_peaks()
    assert (peak.peak_bytes, peak.at) == (5 * GIB, 1.5)


def test_a_gpu_without_a_reading_or_a_process_list_does_not_hide_the_next() -> None:
    tracker = PeakTracker()
    tracker.observe([GIB, GIB, GIB])
    tracker.start_run(100, StaticTree({100}))
    ours = (GpuProcess(100, 2 * GIB),)
    tick = GpuTick(
        1.0,
        (
            GpuSample(0, "GPU-0", "NVIDIA H200", memory_used_bytes=None, processes=ours),
            GpuSample(1, "GPU-1", "NVIDIA H200", memory_used_bytes=3 * GIB, processes=None),
            GpuSample(2, "GPU-2", "NVIDIA H200", memory_used_bytes=3 * GIB, processes=ours),
        ),
    )
    tracker.take(tick)  # GPU 0's used memory is unknown: nothing to subtract from, no error
    assert [(p.index, p.method, p.peak_bytes) for p in tracker.run_peaks()] == [
        (2, PER_PROCESS, 2 * GIB)
    ]


def test_a_run_peak_is_written_to_meta_with_these_keys() -> None:
    from gpuherd.record.peaks import RunPeak

    peak = RunPeak(1, "GPU-b", 3 * GIB, 12.5, PER_PROCESS, GIB)
    assert peak.as_dict() == {
        "gpu": 1,
        "uuid": "GPU-b",
        "peak_bytes": 3 * GIB,
        "at": 12.5,
        "method": "per-process",
        "baseline_bytes": GIB,
    }


class Probe:
    """A memory probe on the `Collector` protocol: slow to open, then one reading, or a bug."""

    name = "probe"
    interval_s = 0.005

    def __init__(self, open_delay_s: float = 0.0, bug: Exception | None = None) -> None:
        self.open_delay_s, self.bug, self.samples = open_delay_s, bug, 0

    def open(self) -> None:
        time.sleep(self.open_delay_s)

    def sample(self) -> tuple[int | None, ...]:
        if self.bug is not None:
            raise self.bug
        self.samples += 1
        if self.samples > 1:
            raise SourceExhausted("the probe is done")
        return (GIB,)

    def close(self) -> None:
        pass


def test_the_sampler_waits_for_its_first_reading_and_says_so() -> None:
    tracker = PeakTracker()
    sampler = PeakSampler(Probe(open_delay_s=0.3), tracker, lambda event: None)
    sampler.start()
    try:
        names = {t.name: t.daemon for t in threading.enumerate()}
        assert names.get("record:probe") is True  # named for its probe, never blocks an exit
        assert sampler.wait_first(30.0) is True  # the reading came after a 0.3 s open
        assert tracker.readings == 1
        assert sampler.wait_first(0.0) is True  # no time left, but a reading is there
    finally:
        sampler.stop()


def test_a_sampler_whose_probe_ends_without_a_reading_stops_waiting() -> None:
    tracker = PeakTracker()
    sampler = PeakSampler(Probe(bug=SourceExhausted("no GPU to read")), tracker, lambda event: None)
    sampler.start()
    assert sampler.wait_first(30.0) is False  # returns when the thread ends, not after 30 s
    sampler.stop()


def test_a_bug_in_the_probe_is_reported_with_its_name() -> None:
    events: list[object] = []
    bug = RuntimeError("index out of range in the probe")
    sampler = PeakSampler(Probe(bug=bug), PeakTracker(), events.append)
    sampler.start()
    assert sampler.wait_first(30.0) is False
    sampler.stop()
    assert events == [Crashed("probe", bug)]

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
from pathlib import Path

import pytest

from collectors.samples import GpuProcess
from gpuherd.record.peaks import BASELINE, PER_PROCESS, PeakTracker
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
        BASELINE, 24 * GIB, 1.5, 10 * GIB)


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
        (0, "GPU-0", 9 * GIB), (1, "GPU-1", 3 * GIB)]
    assert tracker.take(final) == {"GPU-0": 9 * GIB, "GPU-1": 3 * GIB}


def test_a_final_tick_is_never_older_than_the_last_row() -> None:
    # Readings stamped before the last row (a late row) still get a time of their own after it:
    # rows with the same `t` form one tick.
    tracker = PeakTracker()
    tracker.take(tick(1.0, GIB))
    tracker.observe([5 * GIB], taken_at=0.9)
    final = tracker.final_tick()
    assert final is not None and final.taken_at == 1.001


def test_the_final_tick_keeps_what_the_last_row_knew() -> None:
    tracker = PeakTracker()
    last = tick(1.0, GIB)
    tracker.take(last)
    tracker.observe([5 * GIB], taken_at=1.5)
    final = tracker.final_tick()
    assert final is not None
    assert (final.driver_version, final.nvml_version, final.cuda_driver_version) == (
        last.driver_version, last.nvml_version, last.cuda_driver_version)
    assert final.devices[0].name == "NVIDIA H200"


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
    out = subprocess.run([unshare, *user, "--pid", "--fork", "--mount-proc", sys.executable,
                          "-c", RECYCLE], capture_output=True, text=True, timeout=60, cwd=REPO)
    if out.returncode != 0 and "unshare failed" in out.stderr:
        pytest.skip(f"no private pid namespace here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    # the pid first held by a stranger, then by the command's child
    assert out.stdout.splitlines() == ["stranger False", "same pid True", "child True"]

"""Time of one queue decision: 100 waiting jobs over 8 GPUs with a 10 s window at 1 Hz.

Usage: python benchmarks/bench_queue_decision.py [--runs N] [--jobs J] [--gpus G]

The window is filled with 11 rounds of readings (one per second over the 10 s settle period)
and `decide()` is timed alone, N times per scenario, after a warm-up:

* all wait: every GPU is 90 % busy, so every job gets a reason in words (the slowest path);
* mixed: GPUs with different free memory, one that dipped 4 s ago, two busy, twelve live
  reservations, jobs of 2-60 GiB needing 1 or 2 GPUs, some waiting for another job; a few
  launch, the rest get reasons.

Jobs are queued less than 30 min ago, so none holds the line and every one is placed or
explained. It prints the median and p99 per decision in ms, wall and CPU time of the thread
(goal: <= 5 ms), and the time to add one round of readings to the window.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuherd.queue.headroom import (  # noqa: E402
    GpuReading,
    HeadroomWindow,
    Reservation,
    decide,
)
from gpuherd.queue.jobs import Job, JobSpec, JobState  # noqa: E402

GIB = 1 << 30
T0 = 1_764_130_000.0
SETTLE_S = 10.0


def uuid(index: int) -> str:
    return f"GPU-{index:08d}-0000-0000-0000-000000000000"


def build_window(gpus: int, mixed: bool) -> HeadroomWindow:
    window = HeadroomWindow(SETTLE_S)
    for t in range(int(SETTLE_S) + 1):
        round_ = []
        for i in range(gpus):
            free = (10 + 9 * i) * GIB if mixed else 40 * GIB
            busy = 90.0 if (not mixed or i in (1, 5)) else 2.0
            if mixed and i == 3 and t == 6:
                free = GIB  # a dip 4 s before now
            round_.append(GpuReading(T0 + t, uuid(i), i, 80 * GIB, free, busy))
        window.add(round_)
    return window


def build_jobs(count: int, mixed: bool) -> list[Job]:
    rng = random.Random(7)
    jobs = []
    for i in range(1, count + 1):
        spec = JobSpec(
            argv=("python", "train.py", f"--seed={i}"),
            cwd="/work",
            vram_bytes=rng.randint(2, 60) * GIB,
            gpus=2 if mixed and i % 7 == 0 else 1,
            after=i - 1 if mixed and i % 11 == 0 else None,
        )
        jobs.append(
            Job(
                id=i,
                position=i,
                spec=spec,
                state=JobState.WAITING,
                created_at=T0 - rng.randint(0, 600),
            )
        )
    return jobs


def time_decide(
    window: HeadroomWindow, jobs: list[Job], reservations: list[Reservation], runs: int
) -> tuple[list[float], list[float], int, int]:
    """Wall and CPU ms per decision; CPU time leaves out other processes on a busy machine."""
    now = T0 + SETTLE_S
    for _ in range(max(20, runs // 20)):
        decide(window, jobs, reservations, now)
    wall, cpu = [], []
    decision = None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.thread_time()
        decision = decide(window, jobs, reservations, now)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        wall.append((time.perf_counter() - start) * 1000)
    assert decision is not None
    return wall, cpu, len(decision.launches), len(decision.waiting)


def time_add(gpus: int, runs: int) -> float:
    window = HeadroomWindow(SETTLE_S)
    rounds = [
        [GpuReading(T0 + t, uuid(i), i, 80 * GIB, 40 * GIB, 3.0) for i in range(gpus)]
        for t in range(runs)
    ]
    start = time.perf_counter()
    for r in rounds:
        window.add(r)
    return (time.perf_counter() - start) * 1e6 / runs


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    print(
        f"python {platform.python_version()} on {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{args.jobs} waiting jobs x {args.gpus} GPUs x {SETTLE_S:g} s window at 1 Hz, "
        f"{args.runs} decisions per scenario"
    )
    reservations = [
        Reservation(uuid(i % args.gpus), (1 + i % 4) * GIB, f"other/{i}") for i in range(12)
    ]
    for name, mixed, held in (("all wait", False, []), ("mixed", True, reservations)):
        window = build_window(args.gpus, mixed)
        wall, cpu, launched, waiting = time_decide(
            window, build_jobs(args.jobs, mixed), held, args.runs
        )
        print(f"{name:>9} ({launched} launched, {waiting} with a reason):")
        for label, samples in (("wall", wall), ("CPU", cpu)):
            print(
                f"    {label:>4}: median {statistics.median(samples):.3f} ms, "
                f"p99 {p99(samples):.3f} ms, max {max(samples):.3f} ms"
            )
    print(f"window.add of one {args.gpus}-GPU round: {time_add(args.gpus, 20000):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cost of finding which process writes each followed log (`collectors.machine.writers`).

Starts N real processes (`sleep`), of which L each hold one log open for writing (through a
shell-less stdout redirect), and every process listed as a GPU process: the worst case, where
each candidate's `/proc/PID/fd` and the flags of each log fd are read. Reports the wall and CPU
time of one full scan and of one liveness check (what the collector does between scans).

Then the same with logs that no process holds open (opened and closed at each write, as
Lightning's `metrics.csv`): L of the processes run in a directory of their own, their logs two
levels below, and every log is written before every scan, so each full scan also reads every
candidate's working directory and ties each log by it (`collectors.machine.writers_by_cwd`).

    python benchmarks/bench_writer_scan.py [--procs 200] [--logs 20] [--rounds 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.machine.writers import WriterCollector, WriterWatch, scan  # noqa: E402


def timed(fn, rounds: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of `fn()` over `rounds` calls."""
    walls, cpus = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpus.append((time.process_time() - c0) * 1e3)
        walls.append((time.perf_counter() - w0) * 1e3)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=200)
    parser.add_argument("--logs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as where:
        files = {}
        try:
            for i in range(args.procs):
                if i < args.logs:
                    path = os.path.join(where, f"run{i}", "train.log")
                    os.makedirs(os.path.dirname(path))
                    files[path] = os.path.realpath(path)
                    with open(path, "a") as out:
                        procs.append(subprocess.Popen(["sleep", "600"], stdout=out))
                else:
                    procs.append(subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL))
            pids = [p.pid for p in procs]
            found = scan(files, pids)
            assert len(found) == args.logs, f"found {len(found)} of {args.logs} writers"
            full = timed(lambda: scan(files, pids), args.rounds)
            watch = WriterWatch()
            for task_id in files:
                watch.follow(task_id, task_id)
            watch.set_gpu_pids(pids)
            collector = WriterCollector(watch, scan_every_s=3600)
            collector.sample()  # the first, full scan; the rest check liveness only
            live = timed(collector.sample, args.rounds)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    by_cwd = _by_cwd_scan(args.procs, args.logs, args.rounds)
    every_s = WriterCollector(WriterWatch()).scan_every_s
    print(
        f"{args.procs} GPU processes, {args.logs} logs held open for writing, "
        f"{args.rounds} rounds, median"
    )
    print(f"full scan:      {full[0]:.2f} ms wall, {full[1]:.2f} ms CPU")
    print(f"liveness check: {live[0]:.3f} ms wall, {live[1]:.3f} ms CPU")
    print(
        f"full scan, {args.logs} logs opened and closed, tied by working directory: "
        f"{by_cwd[0]:.2f} ms wall, {by_cwd[1]:.2f} ms CPU"
    )
    share = (full[1] / every_s + live[1] * (1 - 1 / every_s)) / 10
    print(
        f"CPU share at one full scan every {every_s:g} s and a check every 1 s: "
        f"{share:.3f} % of one core"
    )
    return 0


def _by_cwd_scan(n_procs: int, n_logs: int, rounds: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of a full scan whose logs are tied by working
    directory: each log was written since the scan before, and no process holds it."""
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as where:
        watch = WriterWatch()
        logs = []
        try:
            for i in range(n_procs):
                run = os.path.join(where, f"run{i}")
                os.makedirs(run)
                procs.append(subprocess.Popen(["sleep", "600"], cwd=run, stdout=subprocess.DEVNULL))
                if i < n_logs:
                    log = os.path.join(run, "lightning_logs", "version_0", "metrics.csv")
                    os.makedirs(os.path.dirname(log))
                    with open(log, "w") as f:
                        f.write("epoch,step,loss\n")
                    watch.follow(log, log, "lightning_csv")
                    logs.append(log)
            watch.set_gpu_pids(p.pid for p in procs)
            collector = WriterCollector(watch, scan_every_s=0)  # every sample a full scan
            collector.sample()  # notes the logs' modification times
            stamp = [time.time() + 10]

            def scan_after_writes() -> None:
                stamp[0] += 1  # a write since the last scan, after every process started
                for log in logs:
                    os.utime(log, (stamp[0], stamp[0]))
                tick = collector.sample()
                assert len(tick.logs) == n_logs, f"tied {len(tick.logs)} of {n_logs} logs"
                # forget the ties, so that every round ties every log again (the worst case)
                collector._known.clear()

            return timed(scan_after_writes, rounds)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())

"""Latency from a metric line being written to its metric being available through the log tail.

Figure: "line written -> metric available: p99 <= 250 ms".

A writer process appends `step=N loss=X wall=T` lines at `--rate` lines per second for
`--seconds`, writing and flushing each line (or each `--burst` of lines) on its own, T being
`time.time()` just before the write. A `LogTailCollector` with default settings (woken by the
shared watchdog `TailWaker`, or polling with `--poll`) runs in `run_collector` on a thread, as in
the dashboard; the emit callback stamps `time.time()` when each batch arrives and subtracts each
metric's T. Lines lost or received twice are counted too.

    python benchmarks/bench_log_latency.py [--rate 100] [--seconds 20] [--burst 1] [--poll]

Prints one JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.base import Sampled  # noqa: E402
from collectors.logs.logtail import LogTailCollector  # noqa: E402
from collectors.logs.logtail_waker import TailWaker  # noqa: E402
from collectors.loop import run_collector  # noqa: E402

WRITER = r"""
import sys, time
path, rate, seconds, burst = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
total = int(rate * seconds)
start = time.monotonic()
with open(path, "a", buffering=1) as out:
    step = 0
    while step < total:
        due = start + step / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        lines = []
        for _ in range(min(burst, total - step)):
            lines.append(f"step={step} loss={1.0 / (step + 1):.6f} wall={time.time():.6f}\n")
            step += 1
        out.write("".join(lines))
        out.flush()
print(total)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def run(rate: float, seconds: float, burst: int, poll: bool) -> dict[str, object]:
    directory = tempfile.mkdtemp(prefix="gpuherd-latency-")
    log = os.path.join(directory, "train.log")
    Path(log).touch()
    latencies: list[float] = []
    steps: list[int] = []
    got_first = threading.Event()

    def emit(event: object) -> None:
        now = time.time()
        got_first.set()
        if isinstance(event, Sampled):
            for _, metric in event.sample.metrics:
                values = metric.as_dict()
                if "wall" in values and metric.step is not None:
                    latencies.append(now - values["wall"])
                    steps.append(metric.step)

    waker = TailWaker()
    tail = LogTailCollector(log, waker=waker, poll=poll)
    stop = threading.Event()
    thread = threading.Thread(target=run_collector, args=(tail, emit, stop), daemon=True)
    cpu_before = time.process_time()
    thread.start()
    got_first.wait(10)
    writer = subprocess.run(
        [sys.executable, "-c", WRITER, log, str(rate), str(seconds), str(burst)],
        capture_output=True,
        text=True,
        check=True,
    )
    total = int(writer.stdout.strip())
    deadline = time.monotonic() + 10
    while len(steps) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    tail.wake()
    thread.join(timeout=10)
    cpu = time.process_time() - cpu_before
    waker.close()
    os.unlink(log)
    os.rmdir(directory)
    ms = [1000 * v for v in latencies]
    return {
        "figure": "log line written -> metric available",
        "mode": "poll" if tail.polling else "watchdog",
        "rate_lines_s": rate,
        "burst": burst,
        "seconds": seconds,
        "lines": total,
        "received": len(steps),
        "lost": total - len(set(steps)),
        "duplicates": len(steps) - len(set(steps)),
        "p50_ms": round(percentile(ms, 50), 2) if ms else None,
        "p90_ms": round(percentile(ms, 90), 2) if ms else None,
        "p99_ms": round(percentile(ms, 99), 2) if ms else None,
        "max_ms": round(max(ms), 2) if ms else None,
        "tail_cpu_pct": round(100 * cpu / seconds, 2),
        "goal_p99_ms": 250,
        "machine": platform.node(),
        "python": platform.python_version(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="lines per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=1, help="lines per write")
    parser.add_argument("--poll", action="store_true", help="poll instead of watchdog")
    args = parser.parse_args()
    result = run(args.rate, args.seconds, args.burst, args.poll)
    print(json.dumps(result))
    verdict = "met" if result["p99_ms"] is not None and result["p99_ms"] <= 250 else "NOT met"
    print(
        f"{result['mode']}: {result['received']}/{result['lines']} metrics, "
        f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, max {result['max_ms']} ms, "
        f"lost {result['lost']}, duplicates {result['duplicates']}; goal p99 <= 250 ms "
        f"{verdict}; tail CPU {result['tail_cpu_pct']} % of a core"
    )
    return 0 if verdict == "met" and not result["lost"] and not result["duplicates"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

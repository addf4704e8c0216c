"""Peak resident memory while following a 2 GB training log from its start.

Figure: "following a 2 GB log from its start: RSS stays under 100 MB".

A child process writes a log of `--size-gb` GB into `--dir` (default: the system temp folder):
key=value metric lines, tqdm bars redrawn with `\r` hundreds of times per line, tracebacks,
invalid UTF-8, and every 64 MB one 8 MB line. Then this process
follows it from offset 0 with a `LogTailCollector` run by `run_collector`, feeding every batch
into a `TaskTracker` (the dashboard's consumer), until the whole file is read. A sampler thread
reads this process's RSS every 20 ms; `ru_maxrss` gives the kernel's peak. The file is deleted
at the end.

    python benchmarks/bench_tail_memory.py [--size-gb 2] [--dir /tmp]

Prints one JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.base import Sampled  # noqa: E402
from collectors.logs.logtail import LogTailCollector  # noqa: E402
from collectors.loop import run_collector  # noqa: E402
from gpuherd.tasks import TaskTracker  # noqa: E402

GENERATOR = r"""
import sys
path, size = sys.argv[1], int(sys.argv[2])
bar = "".join(f"\rEpoch 3: {i // 10:3d}%|####| {i}/1000 [00:{i % 60:02d}<00:10, 93.1it/s, "
              f"loss=0.{i:03d}]" for i in range(0, 1000, 5))
written = step = 0
with open(path, "wb") as out:
    while written < size:
        chunk = []
        for i in range(2000):
            step += 1
            chunk.append(f"2026-01-01 00:00:00,000 INFO step={step} loss={1.0 / step:.6f} "
                         f"lr=0.0003 grad_norm=0.{step % 997:03d} it/s=12.5\n")
            if i == 1000:
                chunk.append(bar + "\n")
            if i == 1500:
                chunk.append('Traceback (most recent call last):\n  File "x.py", line 1\n')
        data = "".join(chunk).encode() + b"bad utf8 \xff\xfe\xc3 step=x\n"
        if written // (64 << 20) != (written + len(data)) // (64 << 20):
            data += b"z" * (8 << 20) + b"\n"
        out.write(data)
        written += len(data)
print(written)
"""


def rss_sampler(stop: threading.Event, peak: list[int]) -> None:
    me = psutil.Process()
    while not stop.is_set():
        peak[0] = max(peak[0], me.memory_info().rss)
        stop.wait(0.02)


def follow(path: str, size: int) -> dict[str, object]:
    tracker = TaskTracker()
    done = threading.Event()
    counts = {"batches": 0, "lines": 0, "metrics": 0, "unparsed": 0, "too_long": 0}

    def emit(event: object) -> None:
        if isinstance(event, Sampled):
            batch = event.sample
            tracker.add_batch(batch)
            counts["batches"] += 1
            counts["lines"] += batch.lines_read
            counts["metrics"] += len(batch.metrics)
            counts["unparsed"] += batch.unparsed_lines
            counts["too_long"] += batch.too_long_lines
            if batch.offset_bytes >= size:
                done.set()

    tail = LogTailCollector(path, poll=True)
    stop = threading.Event()
    thread = threading.Thread(target=run_collector, args=(tail, emit, stop), daemon=True)
    started = time.monotonic()
    thread.start()
    done.wait()
    elapsed = time.monotonic() - started
    stop.set()
    tail.wake()
    thread.join(timeout=30)
    view = tracker.view(path)
    return {
        **counts,
        "seconds": round(elapsed, 1),
        "mb_s": round(size / elapsed / 1e6, 1),
        "series_points": len(tracker.series(path, "train/loss")),
        "last_step": view.step if view else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    size = int(args.size_gb * 1e9)
    free = shutil.disk_usage(args.dir).free
    if free < size * 1.1:
        print(
            f"only {free / 1e9:.1f} GB free in {args.dir}: pass a smaller --size-gb or "
            f"another --dir",
            file=sys.stderr,
        )
        return 2
    path = os.path.join(args.dir, f"gpuherd-bench-{os.getpid()}.log")
    try:
        written = int(
            subprocess.run(
                [sys.executable, "-c", GENERATOR, path, str(size)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        baseline = psutil.Process().memory_info().rss
        peak = [baseline]
        stop = threading.Event()
        sampler = threading.Thread(target=rss_sampler, args=(stop, peak), daemon=True)
        sampler.start()
        result = follow(path, written)
        stop.set()
        sampler.join()
    finally:
        if os.path.exists(path):
            os.unlink(path)
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {
        "figure": "RSS while following a log from its start",
        "file_bytes": written,
        **result,
        "rss_before_mb": round(baseline / 2**20, 1),
        "peak_rss_mb": round(peak[0] / 2**20, 1),
        "ru_maxrss_mb": round(maxrss_kb / 1024, 1),
        "goal_mb": 100,
        "machine": platform.node(),
        "python": platform.python_version(),
    }
    print(json.dumps(out))
    verdict = "met" if out["ru_maxrss_mb"] < 100 else "NOT met"
    print(
        f"{written / 1e9:.2f} GB, {result['lines']} lines in {result['seconds']} s "
        f"({result['mb_s']} MB/s): peak RSS {out['peak_rss_mb']} MB sampled, "
        f"{out['ru_maxrss_mb']} MB ru_maxrss (before: {out['rss_before_mb']} MB); "
        f"goal < 100 MB {verdict}"
    )
    return 0 if verdict == "met" else 1


if __name__ == "__main__":
    raise SystemExit(main())

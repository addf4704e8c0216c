"""Lines per second of the whole log path into `metrics.csv`, beside the parser alone.

Usage: python benchmarks/bench_tail_throughput.py [--lines N] [--repeats R] [--recorder]

For each of three shapes of metric line, the shapes of logs in tests/data/logs,

* `kv`: `step=12 loss=0.4567` (what a `print` in a training loop writes),
* `logging`: `2026-11-26 06:07:46,953 INFO step=5 loss=1.1545 lr=0.05 grad_norm=0.606`
  (tests/data/logs/generic/train.log),
* `jsonl`: `{"step": 1, "loss": 1.27, "lr": 0.05, "grad_norm": 0.89, "time": ...}`
  (tests/data/logs/jsonl/train.jsonl),

a file of N lines is written, then two passes run in this process, on one core:

* tail -> metrics.csv: `LogTailCollector.sample()` (read by offset, split lines, detect, parse,
  findings, `LogBatch`) and `LogSink` writing each batch through a real `SessionWriter`, until
  the file is read to its end; the rows in `metrics.csv` are counted and checked;
* anchor, parser only: the same lines, already split, fed to the detected format's parser plus
  the findings scan, as `bench_parse.py` does.

Rates are per second of this process's CPU time (the "one core" of the goal; other work on a
shared machine does not lower them), best of R; wall-clock rates follow in brackets. Goal:
>= 100,000 metric lines/s for the whole path.

`--recorder` adds one run of the real recorder (`Recording` with its collector, queue and
writer threads) following the `kv` file with `--log` and stopped at once: stopping reads the
file to its end, so the wall time of `stop()` is the time to record the whole backlog.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after site-packages: an installed (maybe compiled) gpuherd wins

from collectors.logs.logtail import LogTailCollector  # noqa: E402
from gpuherd import parsers_compiled  # noqa: E402
from gpuherd.record.logsink import LogSink  # noqa: E402
from gpuherd.session.session import SessionWriter  # noqa: E402
from parsers.findings import scan_line  # noqa: E402
from parsers.registry import detect_format, make_parser  # noqa: E402

START_T = 1795673266.0


def kv_line(i: int) -> str:
    return f"step={i} loss={2.5 / (1 + i * 1e-4):.4f}\n"


def logging_line(i: int) -> str:
    seconds = int(i / 1000)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(START_T + seconds))
    return (
        f"{stamp},{i % 1000:03d} INFO step={i} loss={2.5 / (1 + i * 1e-4):.4f} lr=0.05 "
        f"grad_norm={0.9 / (1 + (i % 97)):.3f}\n"
    )


def jsonl_line(i: int) -> str:
    return (
        json.dumps(
            {
                "step": i,
                "loss": 2.5 / (1 + i * 1e-4),
                "lr": 0.05,
                "grad_norm": 0.9 / (1 + (i % 97)),
                "time": START_T + i * 1e-3,
            }
        )
        + "\n"
    )


SHAPES: dict[str, tuple[str, Callable[[int], str]]] = {
    "kv": ("train.log", kv_line),
    "logging": ("train.log", logging_line),
    "jsonl": ("train.jsonl", jsonl_line),
}


def write_log(path: Path, make: Callable[[int], str], lines: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, lines, 10_000):
            f.write("".join(make(i) for i in range(start, min(lines, start + 10_000))))


def parser_only(path: Path) -> tuple[float, float, int, int]:
    """(CPU s, wall s, metric lines, values) of the detected parser plus the findings scan."""
    lines = path.read_text(encoding="utf-8").splitlines()
    feed = make_parser(detect_format(lines[:200], str(path))).feed
    wall, cpu = time.perf_counter(), time.process_time()
    metric_lines = values = 0
    for line in lines:
        scan_line(line)
        metric = feed(line)
        if metric is not None:
            metric_lines += 1
            values += len(metric.values)
    return time.process_time() - cpu, time.perf_counter() - wall, metric_lines, values


def tail_to_csv(path: Path, work: Path) -> tuple[float, float, int, int, str | None]:
    """(CPU s, wall s, metric lines, metrics.csv rows, format) of the whole path."""
    session = work / "session"
    shutil.rmtree(session, ignore_errors=True)
    size = path.stat().st_size
    writer = SessionWriter(session)
    sink = LogSink()
    tail = LogTailCollector(str(path), poll=True, poll_interval_s=0.0)
    wall, cpu = time.perf_counter(), time.process_time()
    tail.open()
    metric_lines, log_format = 0, None
    while True:
        batch = tail.sample()
        sink(writer, batch)
        metric_lines += len(batch.metrics)
        log_format = batch.format
        if batch.offset_bytes >= size:
            break
    sink.flush(writer)
    writer.close()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    tail.close()
    with open(session / "metrics.csv", newline="", encoding="utf-8") as f:
        rows = sum(1 for _ in csv.reader(f)) - 1
    return cpu, wall, metric_lines, rows, log_format


def run_recorder(path: Path, work: Path, lines: int) -> None:
    from gpuherd.record.recording import Recording, RecordingOptions

    session = work / "recorder"
    shutil.rmtree(session, ignore_errors=True)
    recording = Recording(session, RecordingOptions(logs=[str(path)], peak_interval_s=0))
    started = time.perf_counter()
    recording.start()
    stopping = time.perf_counter()
    error = recording.stop()
    done = time.perf_counter()
    with open(session / "metrics.csv", newline="", encoding="utf-8") as f:
        steps = {int(row["step"]) for row in csv.DictReader(f)}
    print(
        f"recorder, --log of the kv file, stopped at once: {len(steps) / (done - started):,.0f}"
        f" lines/s wall ({done - stopping:.2f} s in stop(), {len(steps):,} of {lines:,} steps "
        f"in metrics.csv{'' if error is None else f', error: {error}'})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--recorder", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tail-"))
    try:
        print(
            f"{args.lines:,} lines per shape, best of {args.repeats}, CPU-time rates "
            "[wall-clock in brackets]; log parsers: "
            f"{'compiled' if parsers_compiled() else 'pure Python'}"
        )
        for shape, (name, make) in SHAPES.items():
            path = work / name
            write_log(path, make, args.lines)
            best_tail = best_parse = (float("inf"), float("inf"))
            for _ in range(args.repeats):  # alternate, so a busy spell hits both
                cpu, wall, metric_lines, rows, log_format = tail_to_csv(path, work)
                best_tail = min(best_tail, (cpu, wall))
                p_cpu, p_wall, p_lines, values = parser_only(path)
                best_parse = min(best_parse, (p_cpu, p_wall))
            ok = metric_lines == p_lines == args.lines and rows == values
            tail_rate, parse_rate = args.lines / best_tail[0], args.lines / best_parse[0]
            print(
                f"{shape:8} ({log_format}, {os.path.getsize(path) / args.lines:.0f} B/line, "
                f"{values / args.lines:.0f} values/line): "
                f"tail -> metrics.csv {tail_rate:>9,.0f} lines/s "
                f"[{args.lines / best_tail[1]:,.0f}]; parser only {parse_rate:>9,.0f} "
                f"[{args.lines / best_parse[1]:,.0f}]; ratio {tail_rate / parse_rate:.2f}; "
                f"{rows:,} rows {'ok' if ok else 'MISMATCH'}"
            )
            if shape == "kv" and args.recorder:
                run_recorder(path, work, args.lines)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU of the whole headless recorder (1 Hz fields, processes, host, a followed log, 50 Hz peaks).

In one run, for `--seconds` (default 60) after a settling period, on a GPU with a training-like
load (a torch matmul loop, so NVML lists a process and utilization moves) and a log that gets a
metrics line ten times a second:

- `gpuherd --record A --log train.log` (defaults: full sample at 1 Hz, peaks at 50 Hz);
- `gpuherd --record B --log train.log --peak-interval 0` (no fast sampler), to show its share;
- `nvidia-smi -l 1` and a plain NVML memory poll every 20 ms, as anchors.

CPU is user+system time of each process over the window, as a percentage of one core; RSS is the
recorder's resident memory at the end. Run from the repository root on a machine with an NVIDIA
GPU:

    python benchmarks/bench_recorder_cpu.py [--seconds 60] [--gpu 0] [--no-load]

Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]

LOAD = r"""
import signal, sys, time
import torch
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
a = torch.randn(4096, 4096, device="cuda")
while True:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    time.sleep(0.05)
"""

NVML_POLL = r"""
import signal, sys, time
import pynvml
interval, index = float(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(index)
peak, due = 0, time.monotonic()
while True:
    peak = max(peak, pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    due += interval
    time.sleep(max(0.0, due - time.monotonic()))
"""


def write_log(path: Path, stop: threading.Event) -> None:
    step = 0
    with open(path, "a", buffering=1) as f:
        while not stop.wait(0.1):
            step += 1
            f.write(
                f"epoch {step // 1000} step {step} loss={2.0 / (1 + step / 500):.4f} "
                f"lr=0.0003 throughput=812.5\n"
            )


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--no-load", action="store_true", help="no torch load on the GPU")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="gpuherd-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": str(args.gpu),
    }
    log = work / "train.log"
    log.touch()
    stop = threading.Event()
    writer = threading.Thread(target=write_log, args=(log, stop), daemon=True)
    writer.start()
    load = None if args.no_load else subprocess.Popen([sys.executable, "-c", LOAD], env=env)
    total = args.settle + args.seconds + 30
    gpuherd = [sys.executable, "-m", "gpuherd", "--record"]
    procs = {
        "gpuherd --record (1 Hz + 50 Hz peaks)": subprocess.Popen(
            [*gpuherd, str(work / "a"), "--log", str(log), "--duration", f"{total}s"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        "gpuherd --record --peak-interval 0": subprocess.Popen(
            [
                *gpuherd,
                str(work / "b"),
                "--log",
                str(log),
                "--peak-interval",
                "0",
                "--duration",
                f"{total}s",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        "nvidia-smi -l 1": subprocess.Popen(
            ["nvidia-smi", "-l", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
        "NVML memory poll 20 ms": subprocess.Popen(
            [sys.executable, "-c", NVML_POLL, "0.02", str(args.gpu)], env=env
        ),
    }
    time.sleep(args.settle)
    ps = {k: psutil.Process(p.pid) for k, p in procs.items()}
    cpu0, t0 = {k: cpu_seconds(p) for k, p in ps.items()}, time.monotonic()
    time.sleep(args.seconds)
    cpu1, t1 = {k: cpu_seconds(p) for k, p in ps.items()}, time.monotonic()
    rss = {k: p.memory_info().rss for k, p in ps.items()}
    for label, proc in procs.items():
        proc.send_signal(signal.SIGINT if "gpuherd" in label or "smi" in label else signal.SIGTERM)
    for proc in procs.values():
        proc.wait(60)
    stop.set()
    if load is not None:
        load.send_signal(signal.SIGTERM)
        load.wait(30)
    results = {
        k: {
            "cpu_pct_one_core": round(100 * (cpu1[k] - cpu0[k]) / (t1 - t0), 3),
            "rss_mb": round(rss[k] / 1e6, 1),
        }
        for k in procs
    }
    meta = json.loads((work / "a" / "meta.json").read_text())
    rows = sum(1 for _ in open(work / "a" / "gpu.csv")) - 1
    metric_rows = (
        sum(1 for _ in open(work / "a" / "metrics.csv")) - 1
        if (work / "a" / "metrics.csv").exists()
        else 0
    )
    main_label = "gpuherd --record (1 Hz + 50 Hz peaks)"
    report = {
        "benchmark": "recorder_cpu",
        "seconds": round(t1 - t0, 1),
        "gpus": [g["name"] for g in meta.get("gpus", [])],
        "driver": meta.get("driver"),
        "load": not args.no_load,
        "results": results,
        "gpu_rows": rows,
        "metric_rows": metric_rows,
        "goal_met": results[main_label]["cpu_pct_one_core"] < 2.0,
        "files": str(work),
    }
    print(json.dumps(report))
    print(
        f"\n{', '.join(report['gpus'])} (driver {report['driver']}), {report['seconds']} s, "
        f"GPU load {'on' if report['load'] else 'off'}, log line every 0.1 s"
    )
    print(f"{'process':<40} {'CPU % of one core':>18} {'RSS MB':>8}")
    for label, r in results.items():
        print(f"{label:<40} {r['cpu_pct_one_core']:>18.2f} {r['rss_mb']:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Short VRAM spikes: how many each monitor catches, and what the recorder costs in CPU.

Workload (a child of `gpuherd --record`): a steady 2 GiB allocation, then twelve 20 GiB spikes held
50 ms, 0.7 s apart (torch.empty + fill + synchronize; freed with empty_cache). The workload writes
the wall-clock window of every spike. In the same run, beside our recorder:

- `nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits --loop-ms=1000`
  and the same with `--loop-ms=100` (the timestamp column is added to align readings);
- a plain NVML poll every 1 s and every 20 ms (separate processes, so their CPU is their own).

A spike is caught by a monitor when one of its readings taken inside the spike's window is within
1 % of the true plateau: that monitor's own pre-spike baseline + 20 GiB. Our recorder's readings
come from `peak_trace.csv` (GPUHERD_PEAK_TRACE=1), which lists every fast reading it took; the
`gpu.csv` rows are checked too. CPU is user+system time of each process over the spike phase,
as a percentage of one core.

Run on a machine with an NVIDIA GPU and torch, from the repository root:

    python benchmarks/bench_spike_capture.py [--gpu 0] [--out DIR]

Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
MIB = 1 << 20

WORKLOAD = r"""
import json, sys, time
import torch
out, spikes, spike_gib, hold_s, gap_s, base_gib, warmup_s = sys.argv[1:8]
spikes, spike_gib, hold_s, gap_s = int(spikes), float(spike_gib), float(hold_s), float(gap_s)
base_gib, warmup_s = float(base_gib), float(warmup_s)
dev = torch.device("cuda:0")
base = torch.empty(int(base_gib * 2**30), dtype=torch.uint8, device=dev)
base.fill_(1)
torch.cuda.synchronize()
open(out + ".ready", "w").write(repr(time.time()))
print("ready: steady allocation in place", flush=True)
time.sleep(warmup_s)
windows, start = [], time.monotonic()
for k in range(spikes):
    time.sleep(max(0.0, start + k * gap_s - time.monotonic()))
    t0 = time.time()
    x = torch.empty(int(spike_gib * 2**30), dtype=torch.uint8, device=dev)
    x.fill_(1)
    torch.cuda.synchronize()
    t1 = time.time()
    time.sleep(hold_s)
    t2 = time.time()
    del x
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    t3 = time.time()
    windows.append({"spike": k + 1, "start": t0, "full": t1, "release": t2, "end": t3})
    print(f"spike {k + 1}/{spikes}: held {1000 * (t2 - t1):.0f} ms", flush=True)
json.dump(windows, open(out + ".tmp", "w"))
import os
os.replace(out + ".tmp", out)
time.sleep(2.0)
"""

NVML_POLL = r"""
import signal, sys, time
import pynvml
interval, index, out = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(index)
with open(out, "w") as f:
    due = time.monotonic()
    try:
        while True:
            used = pynvml.nvmlDeviceGetMemoryInfo(handle).used
            f.write(f"{time.time()!r},{used}\n")
            due += interval
            time.sleep(max(0.0, due - time.monotonic()))
    finally:
        f.flush()
"""


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def wait_for(path: Path, timeout_s: float, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        for p in procs:
            if p.poll() is not None and p.returncode != 0:
                raise SystemExit(f"a benchmark process ended early with {p.returncode}: {p.args}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.02)


def read_nvidia_smi(path: Path) -> list[tuple[float, int]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        out.append((stamp, int(parts[1]) * MIB))
    return out


def read_pairs(path: Path) -> list[tuple[float, int]]:
    out = []
    for line in path.read_text().splitlines():
        t, used = line.split(",")
        out.append((float(t), int(used)))
    return out


def read_trace(path: Path, gpu: int) -> list[tuple[float, int]]:
    with open(path, newline="") as f:
        return [
            (float(r["t"]), int(r["used_bytes"])) for r in csv.DictReader(f) if int(r["gpu"]) == gpu
        ]


def score(
    readings: list[tuple[float, int]], windows: list[dict], spike_bytes: int, before: float
) -> dict:
    """Caught spikes: a reading inside the window within 1 % of baseline + spike."""
    base = [u for t, u in readings if before - 3.0 <= t < before]
    if not base:
        return {
            "caught": 0,
            "baseline_bytes": None,
            "readings": len(readings),
            "note": "no reading before the first spike",
        }
    baseline = statistics.median(base)
    plateau = baseline + spike_bytes
    caught = []
    for w in windows:
        inside = [u for t, u in readings if w["start"] <= t <= w["end"]]
        caught.append(any(abs(u - plateau) <= 0.01 * plateau for u in inside))
    return {
        "caught": sum(caught),
        "baseline_bytes": int(baseline),
        "plateau_bytes": int(plateau),
        "readings": len(readings),
        "best_in_spikes_bytes": max(
            (u for w in windows for t, u in readings if w["start"] <= t <= w["end"]), default=None
        ),
    }


def start_monitors(args: argparse.Namespace, work: Path, env: dict) -> dict:
    smi_query = [
        "nvidia-smi",
        "--query-gpu=timestamp,memory.used",
        "--format=csv,noheader,nounits",
        "-i",
        str(args.gpu),
    ]
    monitors = {}
    for loop_ms in (1000, 100):
        out = open(work / f"smi_{loop_ms}.csv", "w")  # noqa: SIM115 - closed at the end
        monitors[f"nvidia-smi --loop-ms={loop_ms}"] = (
            subprocess.Popen(
                [*smi_query, f"--loop-ms={loop_ms}"], stdout=out, stderr=subprocess.DEVNULL
            ),
            work / f"smi_{loop_ms}.csv",
            out,
        )
    for label, interval in (("NVML poll 1 s", 1.0), ("NVML poll 20 ms", 0.02)):
        path = work / f"nvml_{interval}.csv"
        monitors[label] = (
            subprocess.Popen(
                [sys.executable, "-c", NVML_POLL, str(interval), str(args.gpu), str(path)], env=env
            ),
            path,
            None,
        )
    return monitors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU to use")
    parser.add_argument("--out", type=Path, default=None, help="keep files here (default: tmp)")
    parser.add_argument("--spikes", type=int, default=12)
    parser.add_argument("--spike-gib", type=float, default=20.0)
    parser.add_argument("--hold-ms", type=float, default=50.0)
    parser.add_argument("--gap-s", type=float, default=0.7)
    parser.add_argument("--base-gib", type=float, default=2.0)
    parser.add_argument("--warmup-s", type=float, default=4.0)
    args = parser.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="gpuherd-spikes-"))
    work.mkdir(parents=True, exist_ok=True)
    session = work / "session"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "GPUHERD_PEAK_TRACE": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": str(args.gpu),
    }
    windows_path = work / "spikes.json"
    monitors = start_monitors(args, work, env)
    time.sleep(1.0)
    recorder_out = open(work / "recorder.out", "w")  # noqa: SIM115
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(session),
            "--",
            sys.executable,
            "-c",
            WORKLOAD,
            str(windows_path),
            str(args.spikes),
            str(args.spike_gib),
            str(args.hold_ms / 1000),
            str(args.gap_s),
            str(args.base_gib),
            str(args.warmup_s),
        ],
        cwd=ROOT,
        env=env,
        stdout=recorder_out,
        stderr=subprocess.STDOUT,
    )
    procs = {"gpuherd --record": recorder, **{k: v[0] for k, v in monitors.items()}}
    wait_for(Path(str(windows_path) + ".ready"), 180, [recorder])
    time.sleep(0.5)
    ps = {k: psutil.Process(p.pid) for k, p in procs.items()}
    cpu0, t0 = {k: cpu_seconds(p) for k, p in ps.items()}, time.monotonic()
    wait_for(windows_path, 180, [recorder])
    cpu1, t1 = {k: cpu_seconds(p) for k, p in ps.items()}, time.monotonic()
    recorder.wait(120)
    for label, (proc, _, handle) in monitors.items():
        proc.send_signal(signal.SIGINT if label.startswith("nvidia-smi") else signal.SIGTERM)
        proc.wait(30)
        if handle is not None:
            handle.close()
    recorder_out.close()

    windows = json.loads(windows_path.read_text())
    spike_bytes = int(args.spike_gib * GIB)
    first = windows[0]["start"]
    readings = {"gpuherd --record": read_trace(session / "peak_trace.csv", args.gpu)}
    for label, (_, path, _) in monitors.items():
        readings[label] = (
            read_nvidia_smi(path) if label.startswith("nvidia-smi") else read_pairs(path)
        )
    results = {}
    for label, values in readings.items():
        results[label] = score(values, windows, spike_bytes, first)
        results[label]["cpu_pct_one_core"] = round(100 * (cpu1[label] - cpu0[label]) / (t1 - t0), 3)
    with open(session / "gpu.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["gpu"]) == args.gpu]
    plateau = results["gpuherd --record"].get("plateau_bytes") or 0
    rows_at_plateau = sum(
        1
        for r in rows
        if r["mem_peak_bytes"] and abs(int(r["mem_peak_bytes"]) - plateau) <= 0.01 * plateau
    )
    meta = json.loads((session / "meta.json").read_text())
    holds = [1000 * (w["release"] - w["full"]) for w in windows]
    report = {
        "benchmark": "spike_capture",
        "gpu": next((g["name"] for g in meta.get("gpus", []) if g["index"] == args.gpu), None),
        "driver": meta.get("driver"),
        "spikes": len(windows),
        "hold_ms_median": round(statistics.median(holds), 1),
        "window_ms_median": round(
            statistics.median(1000 * (w["end"] - w["start"]) for w in windows), 1
        ),
        "phase_s": round(t1 - t0, 2),
        "monitors": results,
        "gpu_csv_rows_with_plateau_peak": rows_at_plateau,
        "run_peaks": meta.get("run_peaks"),
        "goal_met": (
            results["gpuherd --record"]["caught"] == len(windows)
            and results["gpuherd --record"]["cpu_pct_one_core"] < 2.0
        ),
        "files": str(work),
    }
    print(json.dumps(report))
    print(
        f"\n{report['gpu']} (driver {report['driver']}): {len(windows)} spikes of "
        f"{args.spike_gib:g} GiB, held {report['hold_ms_median']} ms (window "
        f"{report['window_ms_median']} ms), {args.gap_s} s apart"
    )
    print(f"{'monitor':<28} {'caught':>8} {'readings':>9} {'CPU % of one core':>18}")
    for label, r in results.items():
        print(
            f"{label:<28} {r['caught']:>5}/{len(windows):<2} {r['readings']:>9} "
            f"{r['cpu_pct_one_core']:>18.2f}"
        )
    print(f"gpu.csv rows whose mem_peak_bytes is the plateau: {rows_at_plateau}")
    print(f"files: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

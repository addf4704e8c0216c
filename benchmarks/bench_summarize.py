"""Time and peak memory of `gpuherd summarize` on a 24 h, 8-GPU session (goal: <= 3 s, <= 500 MB).

The session is SYNTHETIC: `benchmarks/make_session.py` writes gpu.csv, processes.csv and host.csv
at 1 Hz through the real SessionWriter; this script adds a metrics.csv (a training log read at
1 Hz: loss, val/acc, lr, throughput for one task over the 24 h) and an events.jsonl with a
few hundred findings. The summary runs in a fresh process (`python -m gpuherd summarize DIR`),
which also writes summary.json and summary.md; its wall time and peak RSS (ru_maxrss) are
measured by this script. Needs no GPU.

    python benchmarks/bench_summarize.py [--gpus 8] [--hours 24] [--keep DIR] [--repeat 3]

Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.make_session import START, make_session  # noqa: E402
from collectors.session.session_format import METRICS_COLUMNS  # noqa: E402


def add_training_log(root: Path, hours: float, seed: int = 1) -> int:
    """metrics.csv and events.jsonl for one task spanning the session; returns metric rows."""
    rng = random.Random(seed)
    seconds = int(hours * 3600)
    rows = 0
    with open(root / "metrics.csv", "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(METRICS_COLUMNS)
        for i in range(seconds):
            t, step, epoch = START + i + 0.3, i * 4, i // 3600
            loss = 2.5 * math.exp(-i / (seconds / 3)) + 0.2 + rng.gauss(0, 0.02)
            out.writerow([f"{t:.3f}", "train.log", i + 1, "train/loss", f"{loss:.5f}", step, epoch])
            out.writerow([f"{t:.3f}", "train.log", i + 1, "lr", "0.0003", step, epoch])
            out.writerow(
                [
                    f"{t:.3f}",
                    "train.log",
                    i + 1,
                    "throughput/it_s",
                    f"{4 + rng.gauss(0, 0.1):.3f}",
                    step,
                    epoch,
                ]
            )
            rows += 3
            if i % 3600 == 3599:
                out.writerow(
                    [
                        f"{t:.3f}",
                        "train.log",
                        i + 1,
                        "val/acc",
                        f"{0.5 + 0.4 * i / seconds:.4f}",
                        step,
                        epoch,
                    ]
                )
                rows += 1
    with open(root / "events.jsonl", "w") as f:
        f.write(json.dumps({"t": START, "kind": "start", "pid": 1, "command": ["train"]}) + "\n")
        for k in range(300):
            f.write(
                json.dumps(
                    {
                        "t": START + 200 * k,
                        "kind": "finding",
                        "task": "train.log",
                        "line": 200 * k,
                        "finding": "stalled",
                        "evidence": "loss flat for 500 steps",
                    }
                )
                + "\n"
            )
        f.write(json.dumps({"t": START + seconds, "kind": "exit", "exit_code": 0}) + "\n")
    meta_path = root / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["command"] = ["python", "train.py"]
    meta_path.write_text(json.dumps(meta))
    return rows


def timed_summarize(root: Path) -> tuple[float, float, str]:
    """Wall seconds and peak RSS (MB) of one summarize process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "summarize", str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    wall = time.perf_counter() - began
    if out.returncode != 0:
        raise SystemExit(f"summarize failed: {out.stderr}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest child so far; runs are identical, so it is this one.
    return wall, max(peak_kb, before) / 1024, out.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="write the session here, keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="gpuherd-sum-")) / "session"
    made = time.perf_counter()
    if not (root / "meta.json").exists():
        make_session(root, args.gpus, args.hours)
        add_training_log(root, args.hours)
    made = time.perf_counter() - made
    size = sum(p.stat().st_size for p in root.iterdir() if p.is_file())
    runs = [timed_summarize(root) for _ in range(args.repeat)]
    walls = sorted(w for w, _, _ in runs)
    rss = max(r for _, r, _ in runs)
    gpu_rows = sum(1 for _ in open(root / "gpu.csv")) - 1
    report = {
        "benchmark": "summarize",
        "synthetic": True,
        "gpus": args.gpus,
        "hours": args.hours,
        "gpu_rows": gpu_rows,
        "session_mb": round(size / 1e6, 1),
        "wall_s_median": round(walls[len(walls) // 2], 3),
        "wall_s_all": [round(w, 3) for w in walls],
        "peak_rss_mb": round(rss, 1),
        "python": sys.version.split()[0],
        "goal_met": walls[len(walls) // 2] <= 3.0 and rss <= 500,
    }
    print(json.dumps(report))
    print(
        f"\nSYNTHETIC session: {args.gpus} GPUs x {args.hours:g} h at 1 Hz, {gpu_rows:,} gpu.csv "
        f"rows, {report['session_mb']} MB on disk (generated in {made:.0f} s)"
    )
    print(f"{'gpuherd summarize (fresh process)':<36} {'wall s':>8} {'peak RSS MB':>12}")
    print(
        f"{'median of ' + str(args.repeat):<36} {report['wall_s_median']:>8.2f} "
        f"{report['peak_rss_mb']:>12.1f}"
    )
    print(runs[-1][2])
    if args.keep is None:
        shutil.rmtree(root.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Write a SYNTHETIC, format-valid session directory for benchmarks (G GPUs x H hours at 1 Hz).

The numbers are made up (a seeded random walk shaped like a training run); the directory is marked
`"synthetic": true` in meta.json and its host is `synthetic-host`. It exists only to give the
summarize and replay benchmarks a session of realistic size. It is written by the real
`gpuherd.session.session.SessionWriter`, so it is exactly what a recording of that size looks like.

    python benchmarks/make_session.py OUT_DIR --gpus 8 --hours 24
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo  # noqa: E402
from gpuherd.session.session import SessionWriter  # noqa: E402

GIB = 1 << 30
TOTAL_BYTES = 80 * GIB
START = 1764130000.0


def make_session(
    out: Path,
    gpus: int,
    hours: float,
    interval_s: float = 1.0,
    procs_per_gpu: int = 2,
    seed: int = 0,
    start: float = START,
) -> int:
    """Write the session; returns the number of GPU ticks written."""
    rng = random.Random(seed)
    ticks = int(hours * 3600 / interval_s)
    names = [(i, f"GPU-synthetic-{i:04d}", "Synthetic H100 80GB") for i in range(gpus)]
    meta = {
        "host": "synthetic-host",
        "driver": "synthetic",
        "started_at": start,
        "tool": "gpuherd benchmarks/make_session.py (synthetic data)",
        "synthetic": True,
        "interval_s": interval_s,
        "nvml_version": "synthetic",
        "cuda_driver_version": "13000",
        "gpus": [
            {"index": i, "uuid": u, "name": n, "mem_total_bytes": TOTAL_BYTES} for i, u, n in names
        ],
    }
    pids = {i: [10000 + 100 * i + k for k in range(procs_per_gpu)] for i in range(gpus)}
    details = tuple(
        ProcessInfo(
            pid,
            user=f"user{i % 3}",
            command=f"python train.py --rank {i}",
            rss_bytes=8 * GIB,
            started_at=start,
            container=None,
        )
        for i in range(gpus)
        for pid in pids[i]
    )
    level = [2.0 * GIB] * gpus
    temp = [35.0] * gpus
    writer = SessionWriter(out, meta)
    with writer:
        for n in range(ticks):
            t = start + n * interval_s
            devices = []
            for i, uuid, name in names:
                level[i] = min(0.9 * TOTAL_BYTES, max(GIB, level[i] + rng.gauss(2e6, 5e7)))
                temp[i] = min(85.0, max(30.0, temp[i] + rng.gauss(0.01, 0.3)))
                used = int(level[i])
                share = used // procs_per_gpu
                devices.append(
                    GpuSample(
                        i,
                        uuid,
                        name,
                        memory_used_bytes=used,
                        memory_total_bytes=TOTAL_BYTES,
                        memory_reserved_bytes=600 << 20,
                        gpu_util_pct=round(rng.uniform(80, 100)),
                        mem_util_pct=round(rng.uniform(20, 60)),
                        temperature_c=round(temp[i]),
                        power_w=round(rng.uniform(300, 650), 2),
                        power_limit_w=700.0,
                        sm_clock_mhz=1980,
                        mem_clock_mhz=2619,
                        pstate=0,
                        ecc_errors_corrected=0,
                        ecc_errors_uncorrected=0,
                        mig_mode=False,
                        processes=tuple(GpuProcess(pid, share) for pid in pids[i]),
                    )
                )
            tick = GpuTick(t, tuple(devices), "synthetic", "synthetic", "13000")
            peaks = {
                d.uuid: int((d.memory_used_bytes or 0) * rng.uniform(1.0, 1.05)) for d in devices
            }
            writer.write_gpu_tick(tick, peaks)
            writer.write_host(
                HostSample(
                    t + interval_s / 2,
                    cpu_pct=rng.uniform(10, 60),
                    cpu_count=128,
                    mem_used_bytes=512 * GIB,
                    mem_total_bytes=2048 * GIB,
                    swap_used_bytes=0,
                    swap_total_bytes=8 * GIB,
                    load_1m=8.0,
                    load_5m=7.5,
                    load_15m=7.0,
                    disk_read_bytes_s=1e6,
                    disk_write_bytes_s=5e5,
                    net_rx_bytes_s=1e7,
                    net_tx_bytes_s=2e7,
                    processes=details,
                )
            )
        writer.close(ended_at=start + ticks * interval_s, exit_code=0)
    return ticks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to create (must not hold a session)")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between rows")
    parser.add_argument("--procs-per-gpu", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    began = time.perf_counter()
    ticks = make_session(
        args.out, args.gpus, args.hours, args.interval, args.procs_per_gpu, args.seed
    )
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(
        f"wrote {args.out}: SYNTHETIC {args.gpus} GPUs x {ticks} ticks, "
        f"{size / 1e6:.1f} MB in {time.perf_counter() - began:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

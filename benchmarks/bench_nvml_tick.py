"""CPU time per NVML tick: gpuherd's NvmlCollector.sample() beside nvitop's snapshot + processes.

Figure: "NVML collector CPU per tick (all 1 Hz fields + processes, 1 GPU) <= 1 ms", measured
beside nvitop's `Device.as_snapshot()` + `Device.processes()` in the same run.

    python benchmarks/bench_nvml_tick.py                    # real GPUs, nvitop anchor if importable
    python benchmarks/bench_nvml_tick.py --with-workload    # also hold 2 GiB in a torch child
    python benchmarks/bench_nvml_tick.py --per-call --json  # per-call costs, JSON output
    python benchmarks/bench_nvml_tick.py --fake             # FakeNvml: checks the script runs

CPU time is `time.process_time()` over N back-to-back ticks after a warm-up, divided by N. It
counts this process's CPU only (user + system), which is what a monitor costs the host.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.base import CollectorUnavailable  # noqa: E402
from collectors.machine.nvml import NvmlCollector, ProcessEntry  # noqa: E402

HOLD_2_GIB = """
import sys, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


def cpu_ms_per_call(call: Callable[[], Any], n: int, warmup: int) -> tuple[float, float]:
    """CPU and wall milliseconds per call of `call`, over `n` calls after `warmup` calls."""
    for _ in range(warmup):
        call()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        call()
    cpu1, wall1 = time.process_time(), time.perf_counter()
    return 1000 * (cpu1 - cpu0) / n, 1000 * (wall1 - wall0) / n


def fake_backend(gpus: int, procs: int) -> Any:
    from tests.fakes import FakeGpu, FakeNvml, GiB

    return FakeNvml(
        [
            FakeGpu(
                uuid=f"GPU-fake-{i}",
                used=(procs + 1) * GiB,
                compute=[ProcessEntry(1000 + p, GiB) for p in range(procs)],
            )
            for i in range(gpus)
        ]
    )


def measure_gpuherd(backend: Any, n: int, warmup: int) -> dict[str, Any]:
    collector = NvmlCollector(backend=backend)
    collector.open()
    try:
        tick = collector.sample()
        cpu_ms, wall_ms = cpu_ms_per_call(collector.sample, n, warmup)
    finally:
        collector.close()
    return {
        "gpus": len(tick.devices),
        "gpu_names": sorted({d.name for d in tick.devices}),
        "processes": sum(len(d.processes or ()) for d in tick.devices),
        "driver": tick.driver_version,
        "cpu_ms_per_tick": round(cpu_ms, 4),
        "wall_ms_per_tick": round(wall_ms, 4),
        "cpu_ms_per_gpu": round(cpu_ms / max(1, len(tick.devices)), 4),
    }


def measure_nvitop(n: int, warmup: int) -> dict[str, Any] | None:
    try:
        import nvitop
        from nvitop import Device
    except ImportError:
        return None
    devices = Device.all()

    def one_round() -> None:
        for device in devices:
            device.as_snapshot()
            device.processes()

    cpu_ms, wall_ms = cpu_ms_per_call(one_round, n, warmup)
    return {
        "name": "nvitop Device.as_snapshot() + Device.processes()",
        "version": getattr(nvitop, "__version__", None),
        "cpu_ms_per_tick": round(cpu_ms, 4),
        "wall_ms_per_tick": round(wall_ms, 4),
    }


def measure_per_call(backend: Any, n: int) -> dict[str, float]:
    """Microseconds of CPU per backend call on GPU 0, and the two calls kept off the tick."""
    backend.init()
    try:
        h = backend.handle(0)
        calls: dict[str, Callable[[], Any]] = {
            "memory_info_v2": lambda: backend.memory_info(h, True),
            "memory_info_v1": lambda: backend.memory_info(h, False),
            "utilization": lambda: backend.utilization(h),
            "temperature": lambda: backend.temperature(h),
            "power": lambda: backend.power(h),
            "power_limit": lambda: backend.power_limit(h),
            "sm_clock": lambda: backend.sm_clock(h),
            "mem_clock": lambda: backend.mem_clock(h),
            "fan": lambda: backend.fan(h),
            "pstate": lambda: backend.pstate(h),
            "ecc_errors": lambda: backend.ecc_errors(h, False),
            "mig_mode": lambda: backend.mig_mode(h),
            "compute_processes": lambda: backend.compute_processes(h),
            "graphics_processes": lambda: backend.graphics_processes(h),
            "name": lambda: backend.name(h),
            "uuid": lambda: backend.uuid(h),
        }
        calls.update(_slow_calls(h))
        out = {}
        for name, call in calls.items():
            try:
                call()
            except Exception as error:  # an unsupported call is reported, not timed
                out[name] = f"unsupported: {type(error).__name__}"
                continue
            reps = max(10, n // 20) if name.startswith("slow:") else n
            out[name] = round(1000 * cpu_ms_per_call(call, reps, 3)[0], 2)
        return out
    finally:
        backend.shutdown()


def _slow_calls(handle: Any) -> dict[str, Callable[[], Any]]:
    # Calls the collector deliberately never makes per tick; timed here to show why.
    import pynvml  # noqa: TID251

    return {
        "slow:pcie_throughput": lambda: pynvml.nvmlDeviceGetPcieThroughput(
            handle, pynvml.NVML_PCIE_UTIL_TX_BYTES
        ),
        "slow:total_energy": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
    }


def start_workload() -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_2_GIB], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise SystemExit("the torch workload did not start")
    return child


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--fake", action="store_true", help="use FakeNvml (no GPU needed)")
    parser.add_argument("--fake-gpus", type=int, default=1)
    parser.add_argument("--fake-procs", type=int, default=2)
    parser.add_argument(
        "--with-workload",
        action="store_true",
        help="hold 2 GiB in a torch child so the process list is not empty",
    )
    parser.add_argument("--per-call", action="store_true", help="also time each NVML call")
    parser.add_argument("--no-anchor", action="store_true", help="skip nvitop")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    backend = fake_backend(args.fake_gpus, args.fake_procs) if args.fake else None
    workload = start_workload() if args.with_workload and not args.fake else None
    try:
        try:
            ours = measure_gpuherd(backend, args.ticks, args.warmup)
        except CollectorUnavailable as error:
            print(f"bench_nvml_tick: {error} (use --fake to check the script)", file=sys.stderr)
            return 2
        anchor = None if args.fake or args.no_anchor else measure_nvitop(args.ticks, args.warmup)
        per_call = None
        if args.per_call and not args.fake:
            from collectors.machine.nvml import PynvmlBackend

            per_call = measure_per_call(PynvmlBackend(), args.ticks)
    finally:
        if workload is not None:
            workload.communicate("\n", timeout=60)

    result = {
        "figure": "nvml_tick_cpu_ms",
        "backend": "fake" if args.fake else "pynvml",
        "ticks": args.ticks,
        "python": platform.python_version(),
        "host": platform.node(),
        "gpuherd": ours,
        "anchor": anchor,
        "ratio_anchor_over_gpuherd": (
            round(anchor["cpu_ms_per_tick"] / ours["cpu_ms_per_tick"], 2)
            if anchor and ours["cpu_ms_per_tick"] > 0
            else None
        ),
        "goal_cpu_ms_per_gpu_tick": 1.0,
        # FakeNvml skips ctypes and the driver, so only a real GPU run can judge the goal.
        "meets_goal": None if args.fake else ours["cpu_ms_per_gpu"] <= 1.0,
        "per_call_cpu_us": per_call,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


def print_report(r: dict[str, Any]) -> None:
    ours = r["gpuherd"]
    print(f"backend {r['backend']}  host {r['host']}  python {r['python']}  ticks {r['ticks']}")
    print(
        f"GPUs {ours['gpus']} ({', '.join(ours['gpu_names'])})  driver {ours['driver']}  "
        f"processes listed {ours['processes']}"
    )
    print(
        f"gpuherd NvmlCollector.sample(): {ours['cpu_ms_per_tick']:.4f} ms CPU/tick "
        f"({ours['cpu_ms_per_gpu']:.4f} per GPU), {ours['wall_ms_per_tick']:.4f} ms wall"
    )
    anchor = r["anchor"]
    if anchor is None:
        print("anchor: not measured (nvitop not importable, --no-anchor, or --fake)")
    else:
        print(
            f"anchor {anchor['name']} (nvitop {anchor['version']}): "
            f"{anchor['cpu_ms_per_tick']:.4f} ms CPU/tick, {anchor['wall_ms_per_tick']:.4f} ms "
            f"wall; ratio anchor/gpuherd {r['ratio_anchor_over_gpuherd']}"
        )
    verdict = {None: "not judged (fake backend)", True: "met", False: "NOT met"}[r["meets_goal"]]
    print(f"goal <= {r['goal_cpu_ms_per_gpu_tick']} ms CPU per GPU per tick: {verdict}")
    if r["per_call_cpu_us"]:
        print("per-call CPU, microseconds (GPU 0):")
        for name, us in r["per_call_cpu_us"].items():
            print(f"  {name:24s} {us}")


if __name__ == "__main__":
    sys.exit(main())

"""The container collector with 20 running containers: CPU per tick, wall per refresh.

Figures: "with 20 running containers, the collector's CPU per tick <= 20 ms" and "its wall time
per refresh below `docker stats --no-stream` for the same containers, in the same run".

    python benchmarks/bench_containers.py                       # 18 sleeping + 2 busy, 30 ticks
    python benchmarks/bench_containers.py --containers 20 --busy 0 --ticks 60 --json

Needs a Docker engine (as the `docker` tests do); the image is imported from busybox-static,
every container is named `gpuherd-test-bench-*` and removed at the end.

CPU per tick is `time.process_time()` of this whole process (the tick's thread and every stats
stream reader) over N ticks at the collector's 1 s interval, divided by N: the readers decode
one frame a second per container whatever the tick rate, so this is what the collector costs
the host at 1 Hz. The tick's own call is also timed alone (thread CPU and wall). `docker stats
--no-stream` is timed for the same containers, with its CPU from the children's rusage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.base import Sampled  # noqa: E402
from collectors.loop import run_collector  # noqa: E402
from collectors.machine.containers import DockerCollector  # noqa: E402
from tests.docker_env import Containers, build_image, docker, engine_problem  # noqa: E402


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = docker("version", "--format", "{{.Server.Version}}", check=False).stdout.strip()
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, Docker engine {server}, "
        f"load {os.getloadavg()[0]:.2f}"
    )


class TimedCollector(DockerCollector):
    """The real collector, each `sample()` timed on its own thread."""

    def __init__(self, interval_s: float) -> None:
        super().__init__(interval_s)
        self.calls: list[tuple[float, float]] = []

    def sample(self) -> Any:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        try:
            return super().sample()
        finally:
            self.calls.append(
                (1000 * (time.thread_time() - cpu0), 1000 * (time.perf_counter() - wall0))
            )


def collector_run(names: set[str], ticks: int, interval_s: float) -> dict[str, Any]:
    collector = TimedCollector(interval_s)
    events: list[Any] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=run_collector, args=(collector, events.append, stop), daemon=True
    )
    thread.start()

    def ready() -> bool:
        latest = [e.sample for e in events if isinstance(e, Sampled)]
        if not latest:
            return False
        seen = {c.name: c for c in latest[-1].containers}
        return all(n in seen and seen[n].cpu_pct is not None for n in names)

    deadline = time.monotonic() + 60
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit("the collector did not read every container within 60 s")
        time.sleep(0.1)
    first = len(collector.calls)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while len(collector.calls) < first + ticks:
        time.sleep(0.05)
    cpu1, wall1 = time.process_time(), time.perf_counter()
    calls = collector.calls[first : first + ticks]
    listed = [e.sample for e in events if isinstance(e, Sampled)][-1]
    readers = len(collector.readers)
    stop.set()
    thread.join(10)
    return {
        "ticks": ticks,
        "listed_containers": len(listed.containers),
        "stats_readers": readers,
        "process_cpu_ms_per_tick": 1000 * (cpu1 - cpu0) / ticks,
        "process_cpu_pct_of_core": 100 * (cpu1 - cpu0) / (wall1 - wall0),
        "tick_cpu_ms_median": statistics.median(c for c, _ in calls),
        "tick_wall_ms_median": statistics.median(w for _, w in calls),
        "tick_wall_ms_max": max(w for _, w in calls),
        "failed": sum(1 for e in events if type(e).__name__ == "Failed"),
    }


def docker_stats_runs(names: list[str], runs: int) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            ["docker", "stats", "--no-stream", *names], capture_output=True, check=True, timeout=120
        )
        walls.append(1000 * (time.perf_counter() - start))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    return {
        "runs": runs,
        "wall_ms_median": statistics.median(walls),
        "wall_ms_min": min(walls),
        "cli_cpu_ms_median": statistics.median(cpus),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=20)
    parser.add_argument("--busy", type=int, default=2, help="of them, spinning one core each")
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--stats-runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    problem = engine_problem()
    if problem:
        raise SystemExit(f"no Docker engine: {problem}")
    started = Containers(image=build_image())
    try:
        for i in range(args.containers):
            if i < args.busy:
                started.busy(f"bench-busy{i}")
            else:
                started.idle(f"bench-idle{i}")
        names = [c.name for c in started.started]
        ours = collector_run(set(names), args.ticks, args.interval)
        theirs = docker_stats_runs(names, args.stats_runs)
    finally:
        started.remove_all()
    result = {
        "machine": machine(),
        "containers": args.containers,
        "busy": args.busy,
        "collector": ours,
        "docker_stats_no_stream": theirs,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"# {result['machine']}")
    print(
        f"# {args.containers} containers ({args.busy} busy), {ours['listed_containers']} "
        f"listed by the engine, {ours['stats_readers']} stats readers"
    )
    print(
        f"collector CPU per tick (whole process, {args.ticks} ticks at {args.interval:g} s): "
        f"{ours['process_cpu_ms_per_tick']:.2f} ms ({ours['process_cpu_pct_of_core']:.2f} % "
        "of one core)"
    )
    print(
        f"collector sample() alone: CPU {ours['tick_cpu_ms_median']:.2f} ms, wall "
        f"{ours['tick_wall_ms_median']:.2f} ms median, {ours['tick_wall_ms_max']:.2f} ms max; "
        f"failed ticks {ours['failed']}"
    )
    print(
        f"docker stats --no-stream, same containers: wall {theirs['wall_ms_median']:.0f} ms "
        f"median (min {theirs['wall_ms_min']:.0f}), CLI CPU {theirs['cli_cpu_ms_median']:.0f} "
        "ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

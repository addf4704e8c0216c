"""The Slurm source: CPU per tick with 50 jobs on this node, and its cost where there is no Slurm.

Figures: "the Slurm source costs under 5 ms of CPU a tick with 50 jobs on the node" and
"nothing on a machine without Slurm".

    python benchmarks/bench_slurm.py                 # 50 jobs, 30 ticks (needs .ci/slurm-up)
    python benchmarks/bench_slurm.py --jobs 50 --ticks 60 --json

With Slurm: submits `--jobs` sleeping jobs (`sbatch --wrap`; two of them hold the node's GPUs),
waits until they run, watches one `sleep` pid of every job as if each were a GPU process, then
takes ticks. CPU per tick is this process's `time.process_time()` plus the CPU of the Slurm
commands it ran (children's rusage), over N steady ticks, divided by N; the first tick, which
reads each job's GPUs once (`scontrol show job -d`), is reported apart. The ticks run back to
back on a clock that advances 1 s a tick, so `squeue` runs every `JOBS_REFRESH_S` ticks as it
would at 1 Hz; the ticks that read it and those between are also reported apart. Every job is
cancelled at the end.

Without Slurm (`PATH` without `scontrol`): the composition root's one check (a PATH lookup)
is timed; no collector is built, so there is no per-tick cost at all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.machine.host import PidWatch  # noqa: E402
from collectors.slurm.collector import JOBS_REFRESH_S, SlurmCollector  # noqa: E402
from collectors.slurm.commands import slurm_missing  # noqa: E402
from tests.slurm_env import SlurmJobs, slurm_problem, wait_for  # noqa: E402


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def without_slurm(repeats: int = 2000) -> dict[str, Any]:
    """The root's check on a PATH without scontrol, and whether a collector would be built."""
    from gpuherd.sources import LiveSources, SourceOptions

    env = {"PATH": tempfile.mkdtemp()}
    started = time.perf_counter()
    for _ in range(repeats):
        slurm_missing(env)
    check_us = (time.perf_counter() - started) / repeats * 1e6
    saved = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]
    try:
        built = [c.name for c in LiveSources(SourceOptions(containers=False)).machine()]
    finally:
        os.environ["PATH"] = saved
    return {
        "check_us": round(check_us, 2),
        "collectors_built": built,
        "slurm_collector_built": "slurm" in built,
    }


def with_jobs(jobs: int, ticks: int, directory: Path) -> dict[str, Any]:
    """Submit `jobs` sleeping jobs, then time `ticks` ticks of the collector."""
    submitted = SlurmJobs(directory)
    try:
        for i in range(jobs):
            submitted.submit(
                "sleep 600", *(["--gres=gpu:1"] if i < 2 else []), f"--job-name=bench-{i}"
            )
        wait_for(
            lambda: all(submitted.state(j) == "RUNNING" for j in submitted.ids),
            f"{jobs} jobs to run",
            120,
        )
        pids = [
            wait_for(lambda j=j: submitted.pid_of(j, "sleep"), f"job {j}'s sleep")
            for j in submitted.ids
        ]
        # The ticks follow each other at once, on a clock that advances 1 s a tick: what the
        # source costs at its 1 Hz, without waiting out the seconds.
        now = [time.time()]
        collector = SlurmCollector(PidWatch(pids), interval_s=1.0, clock=lambda: now[0])
        collector.open()
        before = _cpu()
        first = collector.sample()
        first_ms = (_cpu() - before) * 1000
        per_tick: list[float] = []
        for _ in range(ticks):
            now[0] += 1.0
            before = _cpu()
            tick = collector.sample()
            per_tick.append((_cpu() - before) * 1000)
        reads = sorted(per_tick)[-(ticks // int(JOBS_REFRESH_S)) :]
        collector.close()
    finally:
        submitted.cancel_all()
    return {
        "jobs_on_node": len(tick.jobs),
        "gpu_pids_mapped": len(tick.processes),
        "mapped_by": sorted({p.found_by for p in tick.processes}),
        "first_tick_cpu_ms": round(first_ms, 2),
        "first_tick_jobs": len(first.jobs),
        "ticks": ticks,
        "cpu_ms_per_tick_mean": round(statistics.mean(per_tick), 2),
        "cpu_ms_per_tick_p95": round(sorted(per_tick)[int(0.95 * (len(per_tick) - 1))], 2),
        "squeue_every_s": JOBS_REFRESH_S,
        "cpu_ms_of_a_tick_that_reads_squeue": round(statistics.mean(reads), 2),
        "cpu_ms_of_a_tick_between_reads": round(
            statistics.mean(sorted(per_tick)[: ticks - len(reads)]), 2
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Run both parts and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}",
        "without_slurm": without_slurm(),
    }
    problem = slurm_problem()
    if problem is None:
        started = time.perf_counter()
        for _ in range(50):
            slurm_missing()
        result["check_on_a_slurm_node_ms"] = round((time.perf_counter() - started) / 50 * 1e3, 2)
        with tempfile.TemporaryDirectory() as directory:
            result["with_slurm"] = with_jobs(args.jobs, args.ticks, Path(directory))
    else:
        result["with_slurm"] = f"skipped: {problem}"
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

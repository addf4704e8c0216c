"""CPU of an idle queue runner: one job waits on a busy GPU; goal <= 0.3 % of one core.

Usage: python benchmarks/bench_queue_idle.py [--seconds 60] [--interval 1] [--real]

The runner is the real `gpuherd queue run` loop (NVML collector, one `step` per tick: settle,
release, one ledger lock, the headroom decision, the wait reason). Without `--real` its NVML is
`tests/fakes.py` FakeNvml scripted by `tests/queue_runner_fake.py`: one 80 GiB GPU with 70 GiB
used at 95 % utilization, so a job needing 20 GiB waits. With `--real`, on a GPU host, the real
driver is read and the job asks for more memory than any card has, so it waits as well. After a
warm-up (imports, first ticks) the runner process's user + system CPU time is measured over
`--seconds` with psutil and printed as % of one core.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuherd.queue.jobs import JobSpec, JobState  # noqa: E402
from gpuherd.queue.store import QueueStore  # noqa: E402
from tests.queue_helpers import FAKE_RUNNER, GiB, Gpu, write_script  # noqa: E402

WARM_UP_S = 5.0
GOAL_PCT = 0.3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--real", action="store_true", help="read the real NVML driver")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuherd-idle-") as tmp:
        base = Path(tmp)
        state, ledger = base / "state", base / "ledger"
        ledger.mkdir()
        ledger.chmod(0o1777)
        need = (1 << 50) if args.real else 20 * GiB  # a PiB: no real card has that free
        store = QueueStore.open(state)
        job = store.add(JobSpec(argv=("true",), cwd=str(base), vram_bytes=need))
        env = {**os.environ, "GPUHERD_STATE_DIR": str(state), "GPUHERD_LEDGER_DIR": str(ledger)}
        flags = ["--interval", str(args.interval)]
        if args.real:
            argv = [sys.executable, "-m", "gpuherd", "queue", "run", *flags]
        else:
            script = base / "gpus.json"
            write_script(script, [Gpu("GPU-busy", total=80 * GiB, used=70 * GiB, util=95)])
            argv = [sys.executable, str(FAKE_RUNNER), str(script), *flags]
        runner = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            time.sleep(WARM_UP_S)
            proc = psutil.Process(runner.pid)
            before, wall0 = proc.cpu_times(), time.monotonic()
            time.sleep(args.seconds)
            after, wall = proc.cpu_times(), time.monotonic() - wall0
            alive = runner.poll() is None
        finally:
            runner.send_signal(signal.SIGTERM)
            _, err = runner.communicate(timeout=30)
        waiting = store.get(job.id)
    if not alive or waiting.state is not JobState.WAITING or not waiting.wait_reason:
        print(f"the runner did not keep the job waiting: {waiting}\n{err}", file=sys.stderr)
        return 1
    cpu_s = (after.user - before.user) + (after.system - before.system)
    pct = 100.0 * cpu_s / wall
    source = "real NVML" if args.real else "FakeNvml"
    print(f"host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(
        f"idle runner ({source}, interval {args.interval:g} s, one job waiting: "
        f"{waiting.wait_reason!r})"
    )
    print(
        f"CPU over {wall:.1f} s: {cpu_s * 1000:.0f} ms = {pct:.3f} % of one core "
        f"(goal <= {GOAL_PCT} %: {'met' if pct <= GOAL_PCT else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

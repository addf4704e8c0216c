"""kill -9 of the queue runner at random points, then a restart: no job lost, none run twice.

Each trial starts the real runner (FakeNvml at the NVML seam), kills it with SIGKILL either
after a seeded random delay (start-up, deciding, launching, idle) or the moment the queue shows
a job `launching` (inside the launch), and starts the next one. A job is added per trial so
there is always work. At the end one runner finishes the queue. Every job must then be done
and have run exactly once: a job whose launch a kill cut off went back in line (its command
had not passed the launch gate) and ran once later. GPUHERD_QUEUE_FAULT_REPORT, if set,
names a file for the summary line; `GPUHERD_TEST_DEPTH=deep` runs 60 trials (tests/depth.py).
"""

from __future__ import annotations

import collections
import os
import random
import signal
import time
from pathlib import Path

import pytest

from gpuherd.queue.adopt import STOPPED_WHILE_LAUNCHING
from gpuherd.queue.jobs import JobState
from gpuherd.queue.state_files import DB_FILE
from gpuherd.queue.store import QueueStore
from gpuherd.queue.store_rows import data_version, open_read_only, select_jobs
from tests.depth import depth
from tests.queue_helpers import GiB, Gpu, fake_runner, ledger_dir, mark_spec, ran, write_script

pytestmark = pytest.mark.slow

TRIALS = depth(21, 60)
"""21 in the suite (7 aimed at a launch), 60 deep (tests/depth.py), as the fault benchmark in
benchmarks/RESULTS.md ran."""
SEED = 20261126
FLAGS = ("--settle", "0", "--interval", "0.1", "--grace", "600")
ACTIVE = (JobState.WAITING, JobState.LAUNCHING, JobState.RUNNING)


def _kill_when_launching(database: Path, pid: int, timeout_s: float = 4.0) -> bool:
    # Looks every millisecond, reading the jobs only when another connection has committed
    # (SQLite's data_version), as the dashboard's queue panel does: a launch's window is short.
    db = open_read_only(database, 5.0)
    seen = None
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            version = data_version(db)
            if version != seen:
                seen = version
                if any(j.state is JobState.LAUNCHING for j in select_jobs(db)[0]):
                    os.kill(pid, signal.SIGKILL)
                    return True
            time.sleep(0.001)
    finally:
        db.close()
    os.kill(pid, signal.SIGKILL)
    return False


def test_kill_9_at_random_points_loses_no_job_and_runs_none_twice(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    script, state, ledger, work = (
        tmp_path / "gpus.json",
        tmp_path / "state",
        ledger_dir(tmp_path),
        tmp_path / "work",
    )
    work.mkdir()
    # 100 GiB and 30 GiB jobs: three at a time, the rest wait on the reservations.
    write_script(script, [Gpu("GPU-a", total=100 * GiB)])
    store = QueueStore.open(state)
    added = [store.add(mark_spec(f"j{i}", work, 30)).id for i in range(6)]
    seen = collections.Counter()
    started = time.monotonic()
    for trial in range(TRIALS):
        added.append(store.add(mark_spec(f"j{len(added)}", work, 30)).id)
        runner = fake_runner(script, state, ledger, *FLAGS)
        if trial % 3 == 0:
            seen["aimed at a launch"] += 1
            seen["killed mid-launch"] += _kill_when_launching(state / DB_FILE, runner.pid)
        else:
            time.sleep(rng.uniform(0.0, 1.2))
            runner.send_signal(signal.SIGKILL)
        output = runner.communicate(timeout=30)[0]
        assert runner.returncode == -signal.SIGKILL
        seen["put back in line"] += _requeued(output)
        states = collections.Counter(j.state for j in store.jobs())
        seen["kills with a job launching"] += bool(states[JobState.LAUNCHING])
        seen["kills with a job running"] += bool(states[JobState.RUNNING])
    last = fake_runner(script, state, ledger, *FLAGS)
    deadline = time.monotonic() + 180
    while store.jobs(ACTIVE) and time.monotonic() < deadline:
        time.sleep(0.2)
    last.send_signal(signal.SIGTERM)
    seen["put back in line"] += _requeued(last.communicate(timeout=30)[0])
    assert store.jobs(ACTIVE) == []

    jobs = store.jobs()
    marks = collections.Counter(ran(work))
    assert sorted(j.id for j in jobs) == sorted(added)  # no job lost
    assert max(marks.values()) == 1  # none ran twice
    assert [j for j in jobs if j.state is not JobState.DONE] == []  # every job ran
    for job in jobs:
        assert marks[dict(job.spec.env)["QUEUE_JOB_MARK"]] == 1 and job.attempts == 1
    assert sorted(marks) == sorted(dict(j.spec.env)["QUEUE_JOB_MARK"] for j in jobs)
    assert list(ledger.glob("*.json")) == []  # every reservation was released
    requeued = seen.pop("put back in line", 0)
    summary = (
        f"{TRIALS} kill -9 trials (seed {SEED}) over {len(jobs)} jobs in "
        f"{time.monotonic() - started:.0f} s: all {len(jobs)} done and run exactly once "
        f"({requeued} of them put back in line after a kill cut off their launch), "
        f"none lost, none run twice; {dict(seen)}"
    )
    print(summary)
    report = os.environ.get("GPUHERD_QUEUE_FAULT_REPORT")
    if report:
        Path(report).write_text(summary + "\n")


def _requeued(output: bytes | str | None) -> int:
    """How many jobs a runner said it put back in line after a cut-off launch."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output or ""
    return text.count(STOPPED_WHILE_LAUNCHING)

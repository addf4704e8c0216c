"""`gpuherd queue run` as a process: one runner per user, and stopping it leaves jobs running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.liveness import same_process
from gpuherd.queue.store import QueueStore
from tests.queue_helpers import ROOT, GiB, Gpu, fake_runner, ledger_dir, ran, write_script
from tests.recorded import wait_until
from tests.usage_errors import error_line

HOLD_JOB = "while [ -e hold ]; do sleep 0.05; done; echo held >> ran.txt"


def _setup(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    script, work = tmp_path / "gpus.json", tmp_path / "work"
    work.mkdir()
    write_script(script, [Gpu("GPU-a", total=80 * GiB)])
    return script, tmp_path / "state", ledger_dir(tmp_path), work


def _stop(runner: subprocess.Popen[str], signum: int = signal.SIGTERM) -> tuple[int, str]:
    runner.send_signal(signum)
    out, _ = runner.communicate(timeout=30)
    return runner.returncode, out


def test_a_second_runner_of_the_same_user_refuses(tmp_path: Path) -> None:
    script, state, ledger, _ = _setup(tmp_path)
    first = fake_runner(script, state, ledger, "--interval", "0.1")
    try:
        wait_until(
            lambda: (
                (state / "runner.lock").exists()
                and (state / "runner.lock").read_text().strip() == str(first.pid)
            )
        )
        env = {**os.environ, "GPUHERD_STATE_DIR": str(state), "GPUHERD_LEDGER_DIR": str(ledger)}
        second = subprocess.run(
            [sys.executable, "-m", "gpuherd", "queue", "run"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert second.stderr == (
            f"gpuherd: queue: another `gpuherd queue run` (pid {first.pid}) "
            f"already runs the queue in {state}; stop it first (one runner "
            "per user)\n"
        )
        assert first.poll() is None
    finally:
        code, out = _stop(first)
    assert code == 0 and "runner stopped; 0 running job(s) keep running" in out


@pytest.fixture
def hold(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "work" / "hold"
    yield path
    path.unlink(missing_ok=True)  # a failed test leaves no job waiting for it to go


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_runner_leaves_the_job_running_and_the_next_runner_adopts_it(
    tmp_path: Path, signum: int, hold: Path
) -> None:
    script, state, ledger, work = _setup(tmp_path)
    hold.touch()
    store = QueueStore.open(state)
    job = store.add(JobSpec(argv=("sh", "-c", HOLD_JOB), cwd=str(work), vram_bytes=GiB))
    runner = fake_runner(script, state, ledger, "--settle", "0", "--interval", "0.1")
    try:
        wait_until(lambda: store.get(job.id).state is JobState.RUNNING)
    finally:
        code, out = _stop(runner, signum)
    assert code == 0 and "runner stopped; 1 running job(s) keep running" in out
    running = store.get(job.id)
    assert running.state is JobState.RUNNING
    assert running.pid is not None and running.pid_start_time is not None
    assert same_process(running.pid, running.pid_start_time)
    again = fake_runner(script, state, ledger, "--settle", "0", "--interval", "0.1")
    try:
        hold.unlink()
        wait_until(lambda: store.get(job.id).state is JobState.DONE, timeout_s=60)
    finally:
        code, out = _stop(again)
    assert code == 0 and "started job" not in out  # adopted, never started a second time
    assert ran(work) == ["held"] and store.get(job.id).attempts == 1


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--margin", "20XB"], "--margin: '20XB' is not a size"),
        (["--settle", "-1"], "--settle must be 0 or more seconds"),
        (["--grace", "0"], "--grace must be more than 0 seconds"),
        (["--interval", "0.01"], "--interval must be at least 0.05 s (got 0.01)"),
    ],
)
def test_bad_runner_flags_are_one_line_and_exit_2(
    tmp_path: Path, flags: list[str], why: str
) -> None:
    env = {**os.environ, "GPUHERD_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", "run", *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert error_line(out.stderr).startswith(f"gpuherd queue run: error: {why}")
    assert not (tmp_path / "state").exists()  # refused before anything was made


def test_an_unsafe_ledger_is_refused_with_one_line(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    ledger.chmod(0o777)  # writable by everyone and not sticky: anyone could delete entries
    env = {
        **os.environ,
        "GPUHERD_STATE_DIR": str(tmp_path / "state"),
        "GPUHERD_LEDGER_DIR": str(ledger),
    }
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("gpuherd: queue: ") and str(ledger) in line and "sticky" in line


def test_a_job_without_vram_runs_to_completion_under_the_real_runner(tmp_path: Path) -> None:
    """`queue add` without --vram is a need of 0: the runner used to die on it, every restart."""
    script, state, ledger, work = _setup(tmp_path)
    store = QueueStore.open(state)
    zero = store.add(JobSpec(argv=("sh", "-c", "echo zero >> ran.txt"), cwd=str(work)))
    after = store.add(
        JobSpec(argv=("sh", "-c", "echo after >> ran.txt"), cwd=str(work), vram_bytes=GiB)
    )
    runner = fake_runner(script, state, ledger, "--settle", "0", "--interval", "0.1")
    try:
        wait_until(
            lambda: {store.get(j.id).state for j in (zero, after)} == {JobState.DONE}, timeout_s=60
        )
    finally:
        code, out = _stop(runner)
    assert (code, store.get(zero.id).state) == (0, JobState.DONE), out
    assert "Traceback" not in out and sorted(ran(work)) == ["after", "zero"]
    assert not [p for p in ledger.iterdir() if p.name != "ledger.lock"]  # 0 bytes: no entry

"""Stopping a running job: real process groups, real signals, a reused pid left alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from gpuherd.queue.control import stop_job
from gpuherd.queue.jobs import Job, JobSpec, JobState
from gpuherd.queue.liveness import same_process, settle_ended
from gpuherd.queue.store import QueueStore
from tests.queue_jobs import command_pid, run_job
from tests.recorded import wait_until

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


IGNORES_TERM = "trap '' TERM; sleep 100"
"""`sh` and the `sleep` it starts both ignore SIGTERM (an ignored signal stays ignored across
exec), so only SIGKILL ends them."""


@pytest.fixture
def store(tmp_path: Path) -> QueueStore:
    opened = QueueStore.open(tmp_path / "state")
    yield opened
    opened.close()


def exit_record(session: Path) -> dict[str, object]:
    wait_until(lambda: (session / "command.exit.json").exists(), 60)
    return json.loads((session / "command.exit.json").read_text())


def test_a_command_that_ignores_sigterm_gets_sigkill_after_the_grace(
    store: QueueStore, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    job_id, recorder = run_job(store, session, "sh", "-c", IGNORES_TERM)
    pid = command_pid(session)
    assert pid is not None
    group = [p.pid for p in psutil.process_iter() if _pgid(p.pid) == pid]
    assert len(group) == 2, "sh and its sleep share the command's process group"
    store.request_cancel(job_id)
    began = time.monotonic()
    said = stop_job(store.get(job_id), grace_s=1.0)
    assert time.monotonic() - began >= 1.0, "SIGKILL came only after the grace period"
    assert re.fullmatch(
        rf"stopped job {job_id}: SIGTERM to its supervisor \(pid "
        rf"{recorder.pid}\), SIGKILL to its command after 1 s"
        r"( and to the supervisor 1 s later)?",
        said,
    ), said
    recorder.wait(30)
    assert [p for p in group if _alive(p)] == [], "sh and sleep are gone (or zombies)"
    assert exit_record(session)["exit_code"] == 128 + 9
    [settled] = settle_ended(store, time.time())
    assert (settled.id, settled.state, settled.exit_code) == (job_id, JobState.CANCELLED, 137)


def test_a_command_that_honours_sigterm_ends_without_sigkill(
    store: QueueStore, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    job_id, recorder = run_job(store, session, "sleep", "100")
    said = stop_job(store.get(job_id), grace_s=30.0)
    assert re.fullmatch(
        rf"stopped job {job_id}: SIGTERM to its supervisor \(pid "
        rf"{recorder.pid}\); it ended after \d+\.\d s",
        said,
    ), said
    assert recorder.wait(30) == 128 + 15, "the recorder ends with its command's status"
    assert exit_record(session)["exit_code"] == 128 + 15
    meta = json.loads((session / "meta.json").read_text())
    assert meta["ended_at"] is not None, "the recorder closed its session"


def test_a_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "100"], start_new_session=True)
    try:
        started = psutil.Process(bystander.pid).create_time()
        job = _running_job(tmp_path, bystander.pid, started - 50.0)
        said = stop_job(job, grace_s=0.2)
        assert said == f"job 1 was no longer running (pid {bystander.pid} has ended)"
        time.sleep(0.3)
        assert same_process(bystander.pid, started), "the other process was left alone"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_job_without_a_process_yet_is_left_to_the_runner(tmp_path: Path) -> None:
    store = QueueStore.open(tmp_path)
    store.add(JobSpec(argv=("true",), cwd="/"))
    store.mark_launching(1, ["GPU-a"], [0], str(tmp_path / "s"))
    assert stop_job(store.get(1), grace_s=0.1) == (
        "job 1 has no process yet: it is stopped as soon as it starts"
    )
    store.close()


def test_the_command_of_a_killed_recorder_is_stopped_by_its_own_group(
    store: QueueStore, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    job_id, recorder = run_job(store, session, "sh", "-c", IGNORES_TERM)
    pid = command_pid(session)
    os.killpg(recorder.pid, 9)
    recorder.wait(30)
    said = stop_job(store.get(job_id), grace_s=0.5)
    assert said == (
        f"stopped job {job_id}: SIGTERM to its command (pid {pid}; its recorder had "
        "already ended), SIGKILL after 0.5 s"
    )
    assert exit_record(session)["exit_code"] == 137


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _running_job(tmp_path: Path, pid: int, started: float) -> Job:
    store = QueueStore.open(tmp_path)
    store.add(JobSpec(argv=("sleep",), cwd="/"))
    store.mark_launching(1, ["GPU-a"], [0], str(tmp_path / "none"))
    store.mark_running(1, pid, started, started)
    job = store.get(1)
    store.close()
    return job

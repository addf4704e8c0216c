"""Liveness of a job's supervisor, how a job ended (real recorded sessions), and settling it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.liveness import (
    CANCELLED_BEFORE_START,
    LAUNCH_TIMEOUT_S,
    LOST_WHILE_LAUNCHING,
    NO_END_RECORDED,
    JobEnd,
    command_process,
    process_start_time,
    read_job_end,
    recording_pid,
    same_process,
    settle_ended,
)
from gpuherd.queue.store import QueueStore
from tests.queue_jobs import REPO, command_pid, run_job, start_recording
from tests.recorded import wait_until

OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has "
    "a total capacity of 79.19 GiB of which 3.12 GiB is free."
)
SESSIONS = REPO / "tests" / "data" / "sessions"


def record(session: Path, script: str) -> None:
    """Record `sh -c SCRIPT` into `session` with the real command line, to its end."""
    subprocess.run(
        [sys.executable, "-m", "gpuherd", "record", str(session), "--", "sh", "-c", script],
        capture_output=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


@pytest.fixture
def store(tmp_path: Path) -> QueueStore:
    opened = QueueStore.open(tmp_path / "state")
    yield opened
    opened.close()


def test_a_process_is_itself_only_with_its_own_start_time() -> None:
    started = psutil.Process().create_time()
    assert process_start_time(os.getpid()) == started
    assert same_process(os.getpid(), started)
    assert same_process(os.getpid(), started + 0.005), "within the clock-tick tolerance"
    # The same pid with another start time is a reused pid: another process.
    assert not same_process(os.getpid(), started + 1.0)
    assert not same_process(os.getpid(), started - 0.02)


def test_an_ended_process_and_a_zombie_are_gone() -> None:
    child = subprocess.Popen(["sleep", "0"])
    started = psutil.Process(child.pid).create_time()
    wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)
    assert not same_process(child.pid, started), "a zombie has ended"
    child.wait()
    assert not same_process(child.pid, started)
    assert process_start_time(child.pid) is None


def test_a_failed_command_reads_as_its_exit_code(tmp_path: Path) -> None:
    session = tmp_path / "s"
    before = time.time()
    record(session, "exit 3")
    end = read_job_end(session)
    assert end is not None
    assert (end.exit_code, end.peak_vram_bytes, end.oom, end.error) == (3, None, False, None)
    assert end.ended_at is not None and before <= end.ended_at <= time.time()


def test_a_cuda_oom_in_the_log_is_found(tmp_path: Path) -> None:
    session = tmp_path / "s"
    record(session, f"echo '{OOM_LINE}' >&2; exit 1")
    end = read_job_end(session)
    assert end is not None and (end.exit_code, end.oom) == (1, True)


def test_a_command_that_does_not_exist_says_so(tmp_path: Path) -> None:
    session = tmp_path / "s"
    subprocess.run(
        [sys.executable, "-m", "gpuherd", "record", str(session), "--", "no-such-program-here"],
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )
    end = read_job_end(session)
    assert end is not None and end.exit_code == 127 and not end.oom


def test_no_end_is_read_from_a_directory_without_one(tmp_path: Path) -> None:
    assert read_job_end(tmp_path / "missing") is None
    assert read_job_end(tmp_path) is None


def test_the_peak_is_the_highest_of_the_run_peaks(tmp_path: Path) -> None:
    session = Path(shutil.copytree(SESSIONS / "tasks", tmp_path / "s"))
    meta = json.loads((session / "meta.json").read_text())
    meta["exit_code"], meta["ended_at"] = 0, meta["started_at"] + 39
    meta["run_peaks"] = [
        {
            "gpu": 0,
            "uuid": "GPU-a",
            "peak_bytes": 5 << 30,
            "at": None,
            "method": "per-process",
            "baseline_bytes": 0,
        },
        {
            "gpu": 1,
            "uuid": "GPU-b",
            "peak_bytes": 9 << 30,
            "at": None,
            "method": "per-process",
            "baseline_bytes": 0,
        },
    ]
    (session / "meta.json").write_text(json.dumps(meta))
    end = read_job_end(session)
    assert end == JobEnd(
        exit_code=0, ended_at=meta["started_at"] + 39, peak_vram_bytes=9 << 30, oom=False
    )


def test_a_killed_recorder_leaves_the_exit_of_its_command(tmp_path: Path) -> None:
    session = Path(shutil.copytree(SESSIONS / "tasks", tmp_path / "s"))
    meta = json.loads((session / "meta.json").read_text())
    meta.pop("exit_code", None)
    meta["ended_at"] = None
    (session / "meta.json").write_text(json.dumps(meta))
    (session / "command.exit.json").write_text(
        json.dumps(
            {"command": ["x"], "started_at": 100.0, "pid": 1, "ended_at": 150.5, "exit_code": 7}
        )
    )
    end = read_job_end(session)
    assert end is not None and (end.exit_code, end.ended_at) == (7, 150.5)


def test_settle_marks_ended_jobs_by_their_exit_and_leaves_running_ones(
    store: QueueStore, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    failing, recorder1 = run_job(
        store, tmp_path / "s1", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 3"
    )
    passing, recorder2 = run_job(
        store, tmp_path / "s2", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 0"
    )
    assert settle_ended(store, time.time()) == []
    assert store.get(failing).state is JobState.RUNNING
    gate.touch()
    recorder1.wait(60)
    recorder2.wait(60)
    settled = {job.id: job for job in settle_ended(store, time.time())}
    assert sorted(settled) == [failing, passing]
    assert (settled[failing].state, settled[failing].exit_code) == (JobState.FAILED, 3)
    assert (settled[passing].state, settled[passing].exit_code) == (JobState.DONE, 0)
    assert settled[passing].ended_at is not None and settled[passing].wait_reason is None
    assert settle_ended(store, time.time()) == [], "each job is settled once"


def test_a_cancelled_job_settles_as_cancelled_whatever_its_exit(
    store: QueueStore, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    record(session, "exit 0")
    job = store.add(JobSpec(argv=("true",), cwd="/"))
    store.mark_launching(job.id, ["GPU-a"], [0], str(session))
    store.mark_running(job.id, os.getpid(), process_start_time(os.getpid()) + 5, 1.0)
    store.request_cancel(job.id)
    [settled] = settle_ended(store, time.time())
    assert (settled.state, settled.exit_code) == (JobState.CANCELLED, 0)


def test_a_reused_pid_is_not_taken_for_the_supervisor(store: QueueStore, tmp_path: Path) -> None:
    session = tmp_path / "s"
    record(session, "exit 4")
    job = store.add(JobSpec(argv=("true",), cwd="/"))
    store.mark_launching(job.id, ["GPU-a"], [0], str(session))
    # Our own pid is alive, but with another start time it is some other process.
    store.mark_running(job.id, os.getpid(), process_start_time(os.getpid()) - 100, 1.0)
    [settled] = settle_ended(store, time.time())
    assert (settled.state, settled.exit_code) == (JobState.FAILED, 4)


def test_a_supervisor_gone_without_a_record_fails_the_job(
    store: QueueStore, tmp_path: Path
) -> None:
    job = store.add(JobSpec(argv=("true",), cwd="/"))
    store.mark_launching(job.id, ["GPU-a"], [0], str(tmp_path / "never-written"))
    store.mark_running(job.id, os.getpid(), 12.0, 1.0)
    now = time.time()
    [settled] = settle_ended(store, now)
    assert (settled.state, settled.exit_code, settled.ended_at, settled.wait_reason) == (
        JobState.FAILED,
        None,
        now,
        NO_END_RECORDED,
    )


def test_a_job_cancelled_before_its_command_started_says_so(
    store: QueueStore, tmp_path: Path
) -> None:
    store.add(JobSpec(argv=("true",), cwd="/"))
    store.add(JobSpec(argv=("true",), cwd="/"))
    for job_id in (1, 2):
        store.mark_launching(job_id, ["GPU-a"], [0], str(tmp_path / f"never-{job_id}"))
        store.mark_running(job_id, os.getpid(), 12.0, 1.0)
    store.request_cancel(2)
    settled = {job.id: job for job in settle_ended(store, time.time())}
    assert (settled[2].state, settled[2].exit_code, settled[2].wait_reason) == (
        JobState.CANCELLED,
        None,
        CANCELLED_BEFORE_START,
    )
    assert (settled[1].state, settled[1].wait_reason) == (JobState.FAILED, NO_END_RECORDED)


def test_a_launch_left_behind_fails_after_the_timeout_but_never_a_live_one(
    store: QueueStore, tmp_path: Path
) -> None:
    lost = store.add(JobSpec(argv=("true",), cwd="/"))
    store.mark_launching(lost.id, ["GPU-a"], [0], str(tmp_path / "lost"))
    live_session = tmp_path / "live"
    live = store.add(JobSpec(argv=("sleep",), cwd="/"))
    store.mark_launching(live.id, ["GPU-a"], [0], str(live_session))
    recorder = start_recording(live_session, "sleep", "30")
    try:
        wait_until(lambda: command_pid(live_session) is not None, 60)
        assert recording_pid(live_session) == recorder.pid
        began = store.get(lost.id).started_at
        assert settle_ended(store, began + LAUNCH_TIMEOUT_S - 1) == []
        assert settle_ended(store, began + LAUNCH_TIMEOUT_S + 1) == []
        back = store.get(lost.id)
        assert (back.state, back.wait_reason, back.attempts, back.session_dir) == (
            JobState.WAITING,
            LOST_WHILE_LAUNCHING,
            0,
            None,
        )
        assert store.get(live.id).state is JobState.LAUNCHING, "a live recording is adopted"
    finally:
        os.killpg(recorder.pid, 15)
        recorder.wait(60)
    assert recording_pid(live_session) is None


def test_a_killed_recorder_whose_command_runs_on_is_still_running(
    store: QueueStore, tmp_path: Path
) -> None:
    session = tmp_path / "s"
    gate = tmp_path / "gate"
    job_id, recorder = run_job(
        store, session, "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 6"
    )
    pid = command_pid(session)
    assert pid is not None
    job = store.get(job_id)
    assert command_process(session, job.pid_start_time) == (pid, process_start_time(pid))
    assert command_process(session, process_start_time(pid) + 1) is None, "started too early"
    os.killpg(recorder.pid, 9)
    recorder.wait(60)
    assert settle_ended(store, time.time()) == [], "its command still runs"
    gate.touch()
    wait_until(lambda: (session / "command.exit.json").exists(), 60)
    [settled] = settle_ended(store, time.time())
    assert (settled.state, settled.exit_code) == (JobState.FAILED, 6)


def test_a_job_that_ended_with_no_runner_is_shown_ended_and_left_to_the_runner(
    store: QueueStore, tmp_path: Path
) -> None:
    from gpuherd.queue.watch import QueueWatch

    gate = tmp_path / "gate"
    job_id, recorder = run_job(
        store, tmp_path / "s1", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 3"
    )
    env = {**os.environ, "GPUHERD_STATE_DIR": str(tmp_path / "state")}

    def listed() -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "gpuherd", "queue", "ls", "--json"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=60,
        )
        [job] = json.loads(out.stdout)
        return job

    watch = QueueWatch(tmp_path / "state")
    assert listed()["state"] == "running"
    assert [row.state for row in watch.sample().jobs] == ["running"]
    gate.touch()
    recorder.wait(60)
    job = listed()
    assert (job["state"], job["exit_code"]) == ("failed", 3) and job["ended_at"] is not None
    [row] = watch.sample().jobs
    assert (row.state, row.exit_code, row.reason) == (
        "failed",
        3,
        "ended while no runner was running; the next `gpuherd queue run` records it",
    )
    assert store.get(job_id).state is JobState.RUNNING  # shown only: the runner records it
    watch.close()

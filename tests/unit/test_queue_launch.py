"""Launching a job: the gate that keeps an uncommitted launch from running, and start errors."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.launch import NOT_COMMITTED, RUNNER_OUT, session_dir_for, start
from gpuherd.queue.store import QueueError, QueueStore
from tests.queue_helpers import mark_spec, ran
from tests.recorded import wait_until


@pytest.fixture
def store(tmp_path: Path) -> QueueStore:
    return QueueStore.open(tmp_path / "state")


def _launching(store: QueueStore, tmp_path: Path, spec: JobSpec):
    job = store.add(spec)
    session = session_dir_for(tmp_path / "state", job, 1)
    assert store.mark_launching(job.id, ["GPU-x"], [0], str(session))
    return store.get(job.id), session


def test_an_uncommitted_launch_gives_up_without_running_the_command(
    store: QueueStore, tmp_path: Path
) -> None:
    job, session = _launching(store, tmp_path, mark_spec("a", tmp_path, 1))
    started = start(job, session, ["GPU-x"], tmp_path / "state")
    assert started.process.poll() is None  # held at the gate
    started.open_gate()  # as if the runner died before mark_running: the pipe closes
    assert started.process.wait(30) == NOT_COMMITTED
    assert ran(tmp_path) == [] and not (session / "command.log").exists()
    assert "the command was not started: job 1 is launching" in (session / RUNNER_OUT).read_text()


def test_a_killed_runner_closes_the_gate_too(store: QueueStore, tmp_path: Path) -> None:
    job, session = _launching(store, tmp_path, mark_spec("a", tmp_path, 1))
    pid = os.fork()
    if pid == 0:  # a runner that starts the job and is killed before committing it
        start(job, session, ["GPU-x"], tmp_path / "state")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    wait_until(lambda: "not started" in (session / RUNNER_OUT).read_text())
    assert ran(tmp_path) == [] and not (session / "command.log").exists()


def test_a_committed_launch_records_the_command_once(store: QueueStore, tmp_path: Path) -> None:
    job, session = _launching(store, tmp_path, mark_spec("a", tmp_path, 1))
    started = start(job, session, ["GPU-x"], tmp_path / "state")
    assert store.mark_running(job.id, started.pid, started.start_time, 0.0)
    started.open_gate()
    assert started.process.wait(60) == 0
    assert ran(tmp_path) == ["a"]
    assert (session / "command.log").exists() and (session / "meta.json").exists()
    assert stat.S_IMODE(session.stat().st_mode) == 0o700


def test_cancelled_while_launching_is_not_started(store: QueueStore, tmp_path: Path) -> None:
    job, session = _launching(store, tmp_path, mark_spec("a", tmp_path, 1))
    started = start(job, session, ["GPU-x"], tmp_path / "state")
    assert store.mark_running(job.id, started.pid, started.start_time, 0.0)
    store.request_cancel(job.id)
    started.open_gate()
    assert started.process.wait(30) == NOT_COMMITTED
    assert ran(tmp_path) == [] and store.get(job.id).state is JobState.RUNNING


def test_recorder_is_this_gpuherd_whatever_the_job_cwd_holds(tmp_path: Path) -> None:
    # A cwd with its own `gpuherd` package (a checkout of another version) must not be imported.
    (tmp_path / "gpuherd").mkdir()
    (tmp_path / "gpuherd" / "__init__.py").write_text("raise SystemExit(99)\n")
    job = QueueStore.open(tmp_path / "state").add(mark_spec("a", tmp_path, 1))
    started = start(job, tmp_path / "session", ["GPU-x"], None)  # ungated
    assert started.start_time > 0
    wait_until(lambda: ran(tmp_path) == ["a"])
    assert started.process.wait(30) == 0


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (("no-such-command-xyz", "--flag"), "command not found: no-such-command-xyz"),
        (("./missing.sh",), "command not found: ./missing.sh (in {cwd})"),
        (("./plain.txt",), "command not executable: ./plain.txt"),
    ],
)
def test_a_command_that_cannot_start_is_refused_before_anything_runs(
    tmp_path: Path, argv: tuple[str, ...], why: str
) -> None:
    (tmp_path / "plain.txt").write_text("not a program\n")
    job = QueueStore.open(tmp_path / "state").add(JobSpec(argv=argv, cwd=str(tmp_path)))
    with pytest.raises(QueueError) as raised:
        start(job, tmp_path / "session", ["GPU-x"], None)
    assert raised.value.msg == why.format(cwd=tmp_path)
    assert not (tmp_path / "session").exists()


def test_a_vanished_cwd_is_refused(tmp_path: Path) -> None:
    job = QueueStore.open(tmp_path / "state").add(
        JobSpec(argv=("true",), cwd=str(tmp_path / "gone"))
    )
    with pytest.raises(QueueError) as raised:
        start(job, tmp_path / "session", ["GPU-x"], None)
    assert raised.value.msg == f"cwd vanished: {tmp_path / 'gone'} is not a directory any more"

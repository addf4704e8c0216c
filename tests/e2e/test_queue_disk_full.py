"""The queue on a real full disk (a small tmpfs): one line that names the full disk, no traceback.

As the attack ran it: SQLite said `disk I/O error` (not "disk full"), the runner died with a
traceback, and jobs launched as the disk filled ended `failed` with a vague reason.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.liveness import NO_END_RECORDED, process_start_time, settle_ended
from gpuherd.queue.store import QueueStore
from tests.privileges import tmpfs
from tests.queue_helpers import GiB, Gpu, fake_runner, ledger_dir, ran, write_script
from tests.recorded import wait_until
from tests.unit.test_queue_cli import queue


def fill(disk: Path) -> Path:
    """Write a file until the filesystem has no room left; the file (delete it to free)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as error:
                assert error.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return tmpfs(request, tmp_path / "disk", "size=4m")


def test_add_on_a_full_disk_names_the_full_disk(disk: Path, tmp_path: Path) -> None:
    state = disk / "state"
    assert queue(state, "add", "--", "true").returncode == 0
    filler = fill(disk)
    out = queue(state, "add", "--", "true")
    assert (out.returncode, out.stdout) == (2, "")
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"gpuherd queue add: {state / 'queue.db'}: cannot ")
    assert f": the disk holding {state} is full (" in line
    assert line.endswith("); free some space and run the command again")
    filler.unlink()
    assert [j.split()[0] for j in queue(state, "ls").stdout.splitlines()[1:]] == ["1"]


def test_the_runner_names_the_full_disk_and_goes_on_once_there_is_room(
    disk: Path, tmp_path: Path
) -> None:
    state, work, script = disk / "state", tmp_path / "work", tmp_path / "gpus.json"
    work.mkdir()
    write_script(script, [Gpu("GPU-a", total=80 * GiB, used=80 * GiB)])  # no room yet
    store = QueueStore.open(state)
    job = store.add(
        JobSpec(argv=("sh", "-c", "echo ran >> ran.txt"), cwd=str(work), vram_bytes=GiB)
    )
    runner = fake_runner(script, state, ledger_dir(tmp_path), "--settle", "0", "--interval", "0.1")
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(runner.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: store.get(job.id).wait_reason is not None)
        filler = fill(disk)
        write_script(script, [Gpu("GPU-a", total=80 * GiB)])  # room: it tries to launch
        wait_until(lambda: any("is full" in line for line in said), timeout_s=30)
        filler.unlink()
        wait_until(lambda: store.get(job.id).state is JobState.DONE, timeout_s=60)
    finally:
        runner.terminate()
        runner.wait(timeout=30)
        reader.join(timeout=30)
    out = "".join(said)
    assert "Traceback" not in out, out
    full = [line for line in said if "is full" in line]
    assert len(full) == 1 and f"the disk holding {state} is full" in full[0], out
    assert ran(work) == ["ran"]


def test_a_job_whose_recording_died_on_the_full_disk_says_so(disk: Path, tmp_path: Path) -> None:
    store = QueueStore.open(tmp_path / "state")
    job = store.add(JobSpec(argv=("true",), cwd=str(tmp_path), vram_bytes=GiB))
    session = disk / "jobs" / "1-true"
    session.mkdir(parents=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(gone.pid)
    gone.wait()
    assert started is not None
    assert store.mark_launching(job.id, ["GPU-a"], [0], str(session))
    assert store.mark_running(job.id, gone.pid, started, started)
    fill(disk)
    (ended,) = settle_ended(store, started + 1)
    assert (ended.state, ended.wait_reason) == (
        JobState.FAILED,
        f"{NO_END_RECORDED}: the disk holding {session} is full",
    )

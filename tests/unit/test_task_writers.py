"""Which process writes a followed log, found in the real /proc of real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.machine.writers import LogWriters, WriterCollector, WriterWatch, ancestors, scan
from gpuherd.tasks import TaskTracker
from tests.privileges import AS_ROOT, as_other_user, shared_directory

REPO = Path(__file__).resolve().parents[2]

WRITER = r"""
import sys, time
with open(sys.argv[1], sys.argv[2], buffering=1) as f:
    f.write("step=1 loss=1.0\n")
    print("ready", flush=True)
    time.sleep(120)
"""
LAUNCHER = r"""
import subprocess, sys, time
with open(sys.argv[1], "a", buffering=1) as log:
    log.write("launcher up\n")
    # The child gets no copy of the log (close_fds, stdout elsewhere): only the parent holds it.
    child = subprocess.Popen(["sleep", "120"], stdout=subprocess.DEVNULL)
    print(child.pid, flush=True)
    time.sleep(120)
"""


def start(code: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """A process running `code`; what it printed first (once it holds its file)."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_the_scan_finds_the_gpu_process_that_writes_the_log(tmp_path: Path, procs) -> None:
    log = tmp_path / "train.log"
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    found = scan({"t": str(log.resolve())}, [proc.pid])
    assert found == {"t": LogWriters("t", (proc.pid,), (proc.pid,))}


def test_the_scan_finds_the_launcher_that_holds_the_log_above_its_gpu_child(
    tmp_path: Path, procs
) -> None:
    log = tmp_path / "run.log"
    launcher, child_pid = start(LAUNCHER, str(log))
    procs.append(launcher)
    child = int(child_pid)
    assert ancestors(child)[:2] == [child, launcher.pid]
    found = scan({"t": str(log.resolve())}, [child])
    assert found == {"t": LogWriters("t", (launcher.pid,), (child,))}


def test_a_process_that_only_reads_the_log_is_not_its_writer(tmp_path: Path, procs) -> None:
    log = tmp_path / "train.log"
    log.write_text("old line\n")
    reader, _ = start(WRITER.replace('f.write("step=1 loss=1.0\\n")', "f.read()"), str(log), "r")
    writer, _ = start(WRITER, str(log), "r+")  # read-write counts as writing
    procs.extend([reader, writer])
    found = scan({"t": str(log.resolve())}, [reader.pid, writer.pid])
    assert found["t"].writer_pids == (writer.pid,)
    assert scan({"t": str(log.resolve())}, [reader.pid]) == {}


def test_a_gone_pid_or_an_unrelated_log_gives_nothing(tmp_path: Path, procs) -> None:
    log = tmp_path / "train.log"
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    other = tmp_path / "other.log"
    other.touch()
    assert scan({"t": str(other.resolve())}, [proc.pid]) == {}
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert scan({"t": str(log.resolve())}, [gone.pid]) == {}


@pytest.mark.skipif(not AS_ROOT, reason="needs root to run a process other users cannot read")
def test_another_users_processes_are_skipped_without_an_error(procs) -> None:
    with shared_directory() as where:
        log = where / "train.log"
        proc, _ = start(WRITER, str(log), "a")  # root's: /proc/PID/fd is closed to others
        procs.append(proc)
        code = (
            "import json, sys; from collectors.machine.writers import scan; "
            "print(json.dumps(scan({'t': sys.argv[1]}, [int(sys.argv[2])])))"
        )
        result = subprocess.run(
            as_other_user([sys.executable, "-c", code, str(log), str(proc.pid)]),
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {}
    assert result.stderr == ""


def test_a_writer_that_exits_leaves_no_writer_and_the_task_turns_finished(
    tmp_path: Path, procs
) -> None:
    log = tmp_path / "train.log"
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    watch = WriterWatch()
    collector = WriterCollector(watch, scan_every_s=3600)  # after the first: liveness only
    watch.follow("t", str(log))
    watch.set_gpu_pids([proc.pid])
    first = collector.sample()
    assert first.full_scan and first.logs == (LogWriters("t", (proc.pid,), (proc.pid,)),)
    tracker = TaskTracker()
    tracker.writers_seen("t", first.taken_at, first.logs[0].writer_pids, first.logs[0].gpu_pids)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    watch.set_gpu_pids([])  # the driver no longer lists it either
    later = collector.sample()
    assert not later.full_scan and later.logs == (LogWriters("t", (), ()),)
    tracker.writers_seen("t", later.taken_at, (), ())
    view = tracker.view("t")
    assert view is not None and view.status == "finished"
    assert view.pids == (proc.pid,)  # the last process seen stays on the row
    assert view.writer_pids == ()


def test_a_new_log_or_gpu_pid_is_scanned_at_once(tmp_path: Path, procs) -> None:
    log = tmp_path / "train.log"
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    watch = WriterWatch()
    collector = WriterCollector(watch, scan_every_s=3600)
    assert collector.sample().logs == ()
    watch.follow("t", str(log))
    assert collector.sample().logs == ()  # scanned: no GPU process to look at yet
    watch.set_gpu_pids([proc.pid])
    found = collector.sample()  # a new GPU pid: scanned now, not in an hour
    assert found.full_scan and found.logs == (LogWriters("t", (proc.pid,), (proc.pid,)),)


def test_an_exited_writer_not_yet_reaped_is_gone(tmp_path: Path, procs) -> None:
    log = tmp_path / "train.log"
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    watch = WriterWatch()
    collector = WriterCollector(watch, scan_every_s=3600)
    watch.follow("t", str(log))
    watch.set_gpu_pids([proc.pid])
    assert collector.sample().logs[0].writer_pids == (proc.pid,)
    os.kill(proc.pid, signal.SIGKILL)  # not waited for: a zombie until the fixture reaps it
    deadline = time.monotonic() + 10
    while Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert collector.sample().logs == (LogWriters("t", (), ()),)

"""Writing session directories: round trip, locking, unwritable places and a full disk."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from gpuherd.session.session import (
    SessionExistsError,
    SessionLockedError,
    SessionWriteError,
    SessionWriter,
    load_session,
)
from tests.privileges import mounted, tmpfs

GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[2]


def tick(t: float, used: int = 5 * GiB, *, lost: bool = False) -> GpuTick:
    good = GpuSample(
        0,
        "GPU-0",
        "NVIDIA H200",
        memory_used_bytes=used,
        memory_total_bytes=140 * GiB,
        memory_reserved_bytes=None,
        gpu_util_pct=99.0,
        mem_util_pct=None,
        temperature_c=55.0,
        power_w=None,
        pstate=2,
        mig_mode=True,
        processes=(GpuProcess(4242, used - GiB), GpuProcess(99, None, "graphics")),
    )
    other = (
        GpuSample(1, "GPU-1", "NVIDIA H200", error="GPU is lost")
        if lost
        else GpuSample(1, "GPU-1", "NVIDIA H200", memory_used_bytes=0, processes=None)
    )
    return GpuTick(t, (good, other), "580.159.04", "13.580.159.04", "13.0")  # as NVML reads it


def host(t: float) -> HostSample:
    return HostSample(
        t,
        cpu_pct=7.5,
        mem_used_bytes=10 * GiB,
        mem_total_bytes=64 * GiB,
        load_1m=None,
        processes=(
            ProcessInfo(4242, "alice", "python, the, train", rss_bytes=GiB, container="job-1"),
        ),
    )


META = {
    "host": "box",
    "driver": "580.159.04",
    "nvml_version": "13.580.159.04",
    "cuda_driver_version": "13.0",
    "started_at": 1000.0,
    "interval_s": 1.0,
}


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_round_trip_ticks_hosts_and_events(tmp_path):
    ticks = [tick(1000.0), tick(1001.0, 6 * GiB, lost=True), tick(1002.0)]
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_gpu_tick(ticks[0], {"GPU-0": 7 * GiB})
        writer.write_host(host(1000.5))
        writer.write_gpu_tick(ticks[1])
        writer.write_gpu_tick(ticks[2])
        writer.write_event({"kind": "finding", "finding": "nan", "value": float("nan")})
    session = load_session(tmp_path / "s")
    assert list(session.gpu_ticks()) == ticks
    assert list(session.host_samples()) == [host(1000.5)]
    assert [e["value"] for e in session.events()] == ["nan"]
    peaks = [
        r[1][session.headers["gpu.csv"].index("mem_peak_bytes")]
        for r in session.open_csv("gpu.csv")
    ]
    assert peaks[:2] == [str(7 * GiB), ""]
    assert session.meta["ended_at"] is not None and session.warnings == []
    assert not (tmp_path / "s" / ".lock").exists()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "events.jsonl",
        "gpu.csv",
        "host.csv",
        "meta.json",
        "processes.csv",
    ]


def test_close_records_meta_updates_and_append_rows(tmp_path):
    writer = SessionWriter(tmp_path, META)
    writer.append_rows(
        "metrics.csv",
        ("t", "metric", "value"),
        [{"t": 1.5, "metric": "train/loss", "value": 0.25}, (2.5, "lr", None)],
    )
    writer.update_meta(command=["python", "train.py"])
    assert json.loads((tmp_path / "meta.json").read_text())["command"] == ["python", "train.py"]
    writer.close(exit_code=3)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["exit_code"] == 3 and meta["ended_at"] >= meta["started_at"]
    assert (tmp_path / "metrics.csv").read_text() == (
        "t,metric,value\n1.5,train/loss,0.25\n2.5,lr,\n"
    )
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_append_rows_refuses_core_files_and_changed_columns(tmp_path):
    with SessionWriter(tmp_path, META) as writer:
        with pytest.raises(ValueError):
            writer.append_rows("gpu.csv", ("t",), [])
        writer.append_rows("metrics.csv", ("t", "value"), [])
        with pytest.raises(ValueError, match="started with columns"):
            writer.append_rows("metrics.csv", ("t", "other"), [])


def test_rows_reach_the_disk_within_the_flush_interval(tmp_path):
    now = [0.0]
    writer = SessionWriter(tmp_path, META, flush_interval_s=2.0, clock=lambda: now[0])
    writer.write_gpu_tick(tick(1000.0))
    assert (tmp_path / "gpu.csv").read_text().count("\n") == 1  # only the header so far
    now[0] = 2.0
    writer.write_gpu_tick(tick(1001.0))
    assert (tmp_path / "gpu.csv").read_text().count("\n") == 5
    writer.write_host(host(1001.5))
    now[0] = 4.5
    writer.flush_if_due()  # the recorder's writer thread calls this when nothing arrives
    assert (tmp_path / "host.csv").read_text().count("\n") == 2
    writer.close()


def test_a_second_writer_in_another_process_is_refused(tmp_path):
    child = spawn(
        """
        import sys
        from gpuherd.session.session import SessionWriter
        writer = SessionWriter(sys.argv[1], {"driver": None})
        print("ready", flush=True)
        sys.stdin.read()
        writer.close()
        """,
        str(tmp_path),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with pytest.raises(SessionLockedError, match=f"being recorded by pid {child.pid}"):
            SessionWriter(tmp_path, META)
        assert (tmp_path / ".lock").read_text().split()[0] == str(child.pid)
    finally:
        child.communicate("")
    assert child.returncode == 0
    # the first recorder finished properly: its session is kept, not overwritten
    with pytest.raises(SessionExistsError, match="already holds a recorded session"):
        SessionWriter(tmp_path, META)
    assert not (tmp_path / ".lock").exists()


def test_a_second_writer_in_the_same_process_is_refused(tmp_path):
    with SessionWriter(tmp_path, META):
        with pytest.raises(SessionLockedError):
            SessionWriter(tmp_path, META)


def test_stale_lock_of_a_killed_recorder_is_taken_over(tmp_path):
    child = spawn(
        """
        import sys
        from pathlib import Path
        from gpuherd.session.session_lock import SessionLock
        SessionLock(Path(sys.argv[1])).acquire()
        print("ready", flush=True)
        sys.stdin.read()
        """,
        str(tmp_path),
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert (tmp_path / ".lock").read_text().split()[0] == str(child.pid)
    with SessionWriter(tmp_path, META) as writer:
        assert writer.warnings == [
            f"took over the stale lock {tmp_path / '.lock'} of a recorder that is gone "
            f"(pid {child.pid})"
        ]
        assert (tmp_path / ".lock").read_text().split()[0] == str(os.getpid())
    events = list(load_session(tmp_path).events())
    assert [e["kind"] for e in events] == ["lock_taken_over"]


def test_lock_naming_a_live_but_unrelated_pid_is_stale(tmp_path):
    # pid 1 is alive but does not hold the lock: the pid was recycled after a crash
    (tmp_path / ".lock").write_text("1 some-host\n")
    with SessionWriter(tmp_path, META) as writer:
        assert "pid 1" in writer.warnings[0]


def test_directory_under_a_regular_file_is_a_clear_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SessionWriteError, match="a parent of it is a file"):
        SessionWriter(tmp_path / "afile" / "session", META)
    with pytest.raises(SessionWriteError, match="exists and is not a directory"):
        SessionWriter(tmp_path / "afile", META)


def test_bad_meta_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError, match="'host' must be a string"):
        SessionWriter(tmp_path, {"host": 3})
    assert not (tmp_path / ".lock").exists()


@pytest.fixture
def tiny_disk(request, tmp_path):
    """A real 64 KiB filesystem (root only, as in CI), unmounted however the test ends."""
    return tmpfs(request, tmp_path / "tiny", "size=64k")


def test_read_only_filesystem_is_a_clear_error(request, tmp_path):
    where = tmpfs(request, tmp_path / "ro", "ro,size=64k")
    with pytest.raises(SessionWriteError, match="Read-only file system"):
        SessionWriter(where / "s", META)


def test_disk_full_stops_cleanly_and_keeps_what_was_flushed(tiny_disk):
    writer = SessionWriter(tiny_disk / "s", META, flush_interval_s=0.0)
    written = []
    with pytest.raises(SessionWriteError) as info:
        for n in range(100_000):
            writer.write_gpu_tick(tick(1000.0 + n))
            written.append(tick(1000.0 + n))
    assert "the disk is full" in info.value.msg and "is kept" in info.value.msg
    assert str(tiny_disk / "s") in info.value.msg
    with pytest.raises(SessionWriteError):  # and it stays stopped
        writer.write_host(host(1.0))
    writer.close()  # releases the lock and raises nothing new
    assert not (tiny_disk / "s" / ".lock").exists()
    read = list(load_session(tiny_disk / "s").gpu_ticks())
    assert len(written) > 10
    assert read[: len(written)] == written and len(read) - len(written) in (0, 1)


def test_a_write_error_of_one_file_keeps_the_others(tiny_disk):
    # A real full disk: host.csv is first created when the filesystem has no room left.
    # (A link to /dev/full no longer works: the writer never writes through a link.)
    writer = SessionWriter(tiny_disk / "s", META)
    writer.write_gpu_tick(tick(1000.0))
    filler = _fill(tiny_disk)
    with pytest.raises(SessionWriteError, match="host.csv: the disk is full") as info:
        writer.write_host(host(1000.5))
    assert "nothing beyond the start of the session was safely written" in info.value.msg
    filler.unlink()  # room again: closing hands the other files' buffered rows to the kernel
    writer.close(exit_code=1)
    assert list(load_session(tiny_disk / "s").gpu_ticks()) == [tick(1000.0)]
    meta = json.loads((tiny_disk / "s" / "meta.json").read_text())
    assert meta["write_error"] == info.value.msg and meta["exit_code"] == 1
    assert meta["ended_at"] is None  # incomplete


def _fill(disk: Path) -> Path:
    """Fill the filesystem at `disk` to its last byte; the filler file, to remove later."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass  # full
    return filler


def test_a_very_long_command_line_round_trips(tmp_path):
    command = "python train.py " + "--flag=" + "x" * 300_000
    sample = HostSample(1000.5, processes=(ProcessInfo(4242, "alice", command),))
    with SessionWriter(tmp_path, META) as writer:
        writer.write_host(sample)
        writer.write_gpu_tick(tick(1001.0))
    assert list(load_session(tmp_path).host_samples()) == [sample]


class _Finalizers:
    """Stands in for `request` to run a fixture's teardown at a chosen moment."""

    def __init__(self) -> None:
        self.calls: list = []

    def addfinalizer(self, call) -> None:
        self.calls.append(call)


def test_a_tmpfs_is_unmounted_even_while_a_failed_test_holds_a_file_on_it(tmp_path):
    request = _Finalizers()
    where = tmpfs(request, tmp_path / "busy", "size=64k")
    assert mounted(where)
    writer = SessionWriter(where / "s", META)  # a test that fails here never closes it
    try:
        for finalize in request.calls:
            finalize()
        assert not mounted(where)
    finally:
        with contextlib.suppress(SessionWriteError):  # its directory is gone with the mount
            writer.close()

"""The headless recording core: collectors on threads into a session directory, no Textual."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from collectors.base import CollectorError, CollectorUnavailable, SourceExhausted
from collectors.machine.host import PidWatch
from collectors.replay.replay import SessionReplay
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample
from gpuherd.record.recorder import Recorder
from gpuherd.session.session import SessionWriter, load_session
from tests.privileges import tmpfs

META = {"host": "box", "driver": None, "started_at": 1000.0}


class Scripted:
    """A tiny collector: returns or raises its script in order, then is exhausted."""

    def __init__(self, name, script, *, unavailable=None, forever=None, enough=0):
        self.name = name
        self.interval_s = 0.0
        self.script = list(script)
        self.unavailable = unavailable
        self.forever = forever
        self.enough = enough
        self.sampled = 0
        self.enough_seen = threading.Event()
        self.closed = False

    def open(self):
        if self.unavailable:
            raise CollectorUnavailable(self.unavailable, title="NVML")

    def sample(self):
        self.sampled += 1
        if self.enough and self.sampled >= self.enough:
            self.enough_seen.set()
        if self.forever is not None:
            return self.forever(self.sampled)
        if not self.script:
            raise SourceExhausted("done")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self):
        self.closed = True


def tick(t: float, pids=(4242,)) -> GpuTick:
    device = GpuSample(
        0,
        "GPU-0",
        "NVIDIA H200",
        memory_used_bytes=int(t),
        memory_total_bytes=1 << 40,
        processes=tuple(GpuProcess(p, 1 << 20) for p in pids),
    )
    return GpuTick(t, (device,), "580.159.04", "13.580.159.04", "13.0")  # as NVML reads it


def host(t: float) -> HostSample:
    return HostSample(t, cpu_pct=1.0, mem_used_bytes=1, mem_total_bytes=2)


def record(path: Path, collectors, **options) -> Recorder:
    """Record until every finite collector is done; return the shut-down recorder."""
    writer = SessionWriter(path, META)
    recorder = Recorder(writer, collectors, **options)
    recorder.start()
    deadline = time.monotonic() + 10
    while not recorder.collectors_done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.shutdown()
    writer.close()
    return recorder


def kinds(path: Path) -> Counter:
    return Counter((e["kind"], e.get("source")) for e in load_session(path).events())


def test_samples_and_collector_events_are_recorded(tmp_path):
    lost = CollectorError("GPU is lost", title="NVML")
    gpu = Scripted("nvml", [tick(1000.0, (1, 2)), lost, lost, tick(1001.0, (7,))])
    hosts = Scripted("host", [host(1000.5), host(1001.5)])
    docker = Scripted("docker", [], unavailable="no docker socket")
    watch = PidWatch()
    record(tmp_path, [gpu, hosts, docker], pid_watch=watch)
    session = load_session(tmp_path)
    assert list(session.gpu_ticks()) == [tick(1000.0, (1, 2)), tick(1001.0, (7,))]
    assert list(session.host_samples()) == [host(1000.5), host(1001.5)]
    assert kinds(tmp_path) == Counter(
        {
            ("collector_failed", "nvml"): 1,  # once per outage, not once per tick
            ("collector_recovered", "nvml"): 1,
            ("collector_finished", "nvml"): 1,
            ("collector_finished", "host"): 1,
            ("collector_unavailable", "docker"): 1,
        }
    )
    failed = next(e for e in session.events() if e["kind"] == "collector_failed")
    assert failed["msg"] == "GPU is lost" and failed["title"] == "NVML"
    assert watch.get() == frozenset({7})
    assert session.meta["driver"] == "580.159.04"
    assert session.meta["gpus"] == [
        {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200", "mem_total_bytes": 1 << 40}
    ]
    assert gpu.closed and hosts.closed and docker.closed


def test_peaks_hook_fills_mem_peak_bytes(tmp_path):
    gpu = Scripted("nvml", [tick(1000.0), tick(1001.0)])
    record(tmp_path, [gpu], peaks=lambda t: {"GPU-0": int(t.taken_at) + 5})
    session = load_session(tmp_path)
    column = session.headers["gpu.csv"].index("mem_peak_bytes")
    assert [cells[column] for _, cells in session.open_csv("gpu.csv")] == ["1005", "1006"]


@dataclass(frozen=True)
class Metric:
    t: float
    name: str
    value: float


def write_metric(writer, metric):
    writer.append_rows(
        "metrics.csv", ("t", "metric", "value"), [(metric.t, metric.name, metric.value)]
    )


def test_handlers_write_further_sample_types_and_unknown_types_are_noted(tmp_path):
    logs = Scripted("log:train.log", [Metric(1.0, "train/loss", 2.5), Metric(2.0, "lr", 0.1)])
    odd = Scripted("odd", [object(), object()])
    record(tmp_path, [logs, odd], handlers={Metric: write_metric})
    assert (tmp_path / "metrics.csv").read_text() == (
        "t,metric,value\n1.0,train/loss,2.5\n2.0,lr,0.1\n"
    )
    assert kinds(tmp_path)[("sample_not_recorded", "odd")] == 1


def test_a_crashing_collector_is_recorded_and_the_others_go_on(tmp_path):
    buggy = Scripted("buggy", [ZeroDivisionError("division by zero")])
    gpu = Scripted("nvml", [tick(1000.0), tick(1001.0)])
    recorder = record(tmp_path, [buggy, gpu])
    assert recorder.problems == ["buggy: ZeroDivisionError: division by zero"]
    bug = next(e for e in load_session(tmp_path).events() if e["kind"] == "recorder_bug")
    assert "ZeroDivisionError" in bug["traceback"] and bug["source"] == "buggy"
    assert len(list(load_session(tmp_path).gpu_ticks())) == 2
    assert recorder.error is None


def test_stop_event_ends_an_endless_recording(tmp_path):
    gpu = Scripted("nvml", [], forever=lambda n: tick(1000.0 + n), enough=5)
    writer = SessionWriter(tmp_path, META)
    stop = threading.Event()
    recorder = Recorder(writer, [gpu], stop=stop)
    recorder.start()
    assert gpu.enough_seen.wait(10)
    stop.set()
    recorder.shutdown()
    writer.close()
    assert recorder.collectors_done() and gpu.closed
    ticks = list(load_session(tmp_path).gpu_ticks())
    assert len(ticks) >= 5 and [t.taken_at for t in ticks] == sorted(t.taken_at for t in ticks)


def test_a_write_failure_stops_the_recording_and_says_why(request, tmp_path):
    # A real full disk (a link to /dev/full no longer works: the writer never follows links).
    disk = tmpfs(request, tmp_path / "disk", "size=64k")
    hosts = Scripted("host", [], forever=lambda n: host(1000.0 + n))
    writer = SessionWriter(disk, META)
    with (disk / "filler").open("wb", buffering=0) as filler:
        with contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
    recorder = Recorder(writer, [hosts])
    recorder.start()
    assert recorder.stop_event.wait(10)
    recorder.shutdown()
    writer.close()
    assert recorder.error is not None and "the disk is full" in recorder.error.msg
    assert hosts.closed and not (disk / ".lock").exists()


def test_a_replayed_session_records_into_an_equal_session(tmp_path):
    original = tmp_path / "original"
    ticks = [tick(1000.0 + n, (1, 2 + n)) for n in range(6)]
    hosts = [host(1000.5 + n) for n in range(6)]
    with SessionWriter(original, META) as writer:
        for t, h in zip(ticks, hosts, strict=True):
            writer.write_gpu_tick(t)
            writer.write_host(h)
    replay = SessionReplay(original, speed=1e6)
    record(tmp_path / "copy", replay.collectors())
    copy = load_session(tmp_path / "copy")
    assert list(copy.gpu_ticks()) == ticks
    assert list(copy.host_samples()) == hosts


def test_recording_modules_do_not_import_textual():
    code = (
        "import sys, gpuherd.record.recorder, gpuherd.session.session, "
        "collectors.replay.replay; "
        "print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_collector_added_while_recording_runs_and_none_after_shutdown(tmp_path):
    writer = SessionWriter(tmp_path, META)
    recorder = Recorder(writer, [Scripted("nvml", [tick(1000.0)])])
    recorder.start()
    assert recorder.add_collector(Scripted("host", [host(1000.5)]))
    deadline = time.monotonic() + 10
    while not recorder.collectors_done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.shutdown()
    late = Scripted("late", [host(1002.0)])
    assert not recorder.add_collector(late)
    writer.close()
    assert list(load_session(tmp_path).host_samples()) == [host(1000.5)]
    assert late.sampled == 0

"""The running set: one driver of sources that wires them to each other before any sink."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from collectors.base import Collector, CollectorEvent, Crashed, Sampled
from collectors.logs.discovery import DiscoveredLog, DiscoveredLogs
from collectors.machine.host import PidWatch
from collectors.machine.writers import WriterWatch
from collectors.roles import LOG
from collectors.samples import GpuProcess, GpuSample, GpuTick, LogBatch
from gpuherd.dashboard import monitor
from gpuherd.engine.running import RunningSet
from gpuherd.export.headless import build_feed
from gpuherd.sources import SourceOptions, TailSupervisor, live_sources
from tests.fakes import FakeCollector, FakeNvml


class Sink:
    """Keeps every event, and what the watches held when each arrived."""

    def __init__(self, pids: PidWatch | None = None, writers: WriterWatch | None = None) -> None:
        self.events: list[CollectorEvent] = []
        self.pids_seen: list[frozenset[int]] = []
        self.writer_pids_seen: list[frozenset[int]] = []
        self._pids, self._writers = pids, writers
        self.lock = threading.Lock()

    def __call__(self, event: CollectorEvent) -> None:
        with self.lock:
            self.events.append(event)
            if self._pids is not None:
                self.pids_seen.append(self._pids.get())
            if self._writers is not None:
                self.writer_pids_seen.append(self._writers.get()[1])

    def samples(self, kind: type) -> list[object]:
        with self.lock:
            return [
                e.sample
                for e in self.events
                if isinstance(e, Sampled) and isinstance(e.sample, kind)
            ]


def tick(*pids: int) -> GpuTick:
    processes = tuple(GpuProcess(pid=pid, used_memory_bytes=1 << 30) for pid in pids)
    return GpuTick(1.0, (GpuSample(0, "GPU-a", "H100", processes=processes),))


def test_a_gpu_tick_tells_the_host_and_writer_watches_before_any_sink_sees_it() -> None:
    pids, writers = PidWatch(), WriterWatch()
    gpus = FakeCollector([tick(11, 12), tick(13)], name="nvml")
    running = RunningSet([gpus], pid_watch=pids, writers=writers)
    sink = Sink(pids, writers)
    running.attach(sink)
    running.run()
    _wait(running)
    assert running.stop(timeout_s=10) == []
    assert len(sink.samples(GpuTick)) == 2
    # Each sink saw the pids of the tick it was given already set: wired first, then handed on.
    assert sink.pids_seen[:2] == [frozenset({11, 12}), frozenset({13})]
    assert sink.writer_pids_seen[:2] == [frozenset({11, 12}), frozenset({13})]


def test_a_scan_starts_tails_in_the_same_set_and_every_sink_hears_what_changed() -> None:
    found = DiscoveredLog("/r/a.log", "given", "/r/*.log")
    gone = DiscoveredLog("/r/b.log", "given", "/r/*.log")
    scans = [
        DiscoveredLogs(1.0, (found, gone)),
        DiscoveredLogs(2.0, (found,), removed=("/r/b.log",)),
    ]
    read: set[str] = set()

    def make_tail(path: str) -> Collector[LogBatch]:
        return Waiting(
            [LogBatch(path, 1.0, file_path=path)], read, name=f"log:{path}", task_id=path
        )

    tails = TailSupervisor(make_tail)
    writers = WriterWatch()
    discovery = Ordered(scans, read)
    running = RunningSet([discovery], tails=tails, writers=writers)
    first, second = Sink(), Sink()
    running.attach(first)
    running.attach(second)
    running.run()
    _wait(running)
    for sink in (first, second):  # one wiring, every sink told the same
        annotated = sink.samples(DiscoveredLogs)
        assert [(s.started, s.stopped, s.first_scan) for s in annotated] == [
            (("/r/a.log", "/r/b.log"), (), True),
            ((), ("/r/b.log",), False),
        ]
    assert {b.path for b in first.samples(LogBatch)} == {"/r/a.log", "/r/b.log"}  # tails ran here
    assert tails.followed == {"/r/a.log"}  # the vanished run lost its tail
    assert set(writers.get()[0]) == {"/r/a.log"}  # and the writer watch forgot it
    running.stop(timeout_s=10)


def test_a_recording_set_keeps_the_tail_of_a_vanished_run() -> None:
    tails = TailSupervisor(
        lambda path: FakeCollector([], name=f"log:{path}", role=LOG, task_id=path)
    )
    running = RunningSet(tails=tails, keep_vanished=True)
    log = DiscoveredLog("/r/a.log", "given", "/r/a.log")
    assert running.discovered(DiscoveredLogs(1.0, (log,))).started == ("/r/a.log",)
    changed = running.discovered(DiscoveredLogs(2.0, (), removed=("/r/a.log",)))
    assert changed.stopped == () and tails.followed == {"/r/a.log"}
    running.stop(timeout_s=10)


def test_a_stopped_set_starts_nothing_and_a_crash_reaches_every_sink() -> None:
    bug = ZeroDivisionError("a bug")
    running = RunningSet([FakeCollector([bug], name="broken")])
    sink = Sink()
    running.attach(sink)
    running.run()
    _wait(running)
    assert sink.events == [Crashed("broken", bug)]
    assert running.stop(timeout_s=10) == [] and running.stopped
    assert running.start(FakeCollector([1], name="late")) is False


def test_a_sink_given_as_a_bound_method_can_be_detached() -> None:
    """`record --tui` detaches the dashboard's gate (`gate.emit`, a new object each time)."""
    kept, dropped = Sink(), Sink()
    running = RunningSet([FakeCollector([1], name="a")])
    running.attach(kept)
    running.attach(dropped.__call__)
    running.detach(dropped.__call__)
    running.run()
    _wait(running)
    assert dropped.events == [] and kept.samples(int) == [1]
    running.stop(timeout_s=10)


def test_every_sink_runs_the_roots_list_of_sources(tmp_path: Path) -> None:
    """A source added to `LiveSources.collectors()` reaches the dashboard and the exporter."""
    logs = [str(tmp_path / "*.log")]
    root = live_sources(SourceOptions(logs=logs, nvml_backend=FakeNvml([])))
    names = [c.name for c in root.collectors()]
    plan = monitor.live_plan(1.0, FakeNvml([]), logs=logs)
    feed = build_feed(argparse.Namespace(replay=None, interval=1.0, log=logs, watch=[]))
    assert [c.name for c in plan.collectors] == names
    assert [c.name for c in feed.collectors] == names
    assert "discovery" in " ".join(names) and len(names) >= 4
    for sources in (root, plan.sources, feed.sources):
        assert sources is not None
        sources.close()


class Ordered(FakeCollector):
    """Scans in order; the second only after both tails of the first have read once."""

    def __init__(self, scans: list[DiscoveredLogs], read: set[str]) -> None:
        super().__init__(scans, name="discovery")
        self._read = read

    def sample(self) -> object:
        for _ in range(1000):
            if self.sampled != 1 or len(self._read) >= 2:
                break
            threading.Event().wait(0.01)
        return super().sample()


class Waiting(FakeCollector):
    """A tail that notes when it has read (and handed in) its one batch, then ends."""

    def __init__(self, samples: list[object], read: set[str], **kwargs: object) -> None:
        super().__init__(samples, role=LOG, **kwargs)  # type: ignore[arg-type]
        self._read = read

    def sample(self) -> object:
        if self.sampled >= 1:
            self._read.add(self.name)  # the first batch was emitted before this second call
        return super().sample()


def _wait(running: RunningSet) -> None:
    for _ in range(1000):
        if running.done():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"still running: {running.threads.alive()}")


def test_record_tui_builds_its_sources_once_the_dashboards(tmp_path: Path) -> None:
    """The recording of `record --tui` is a sink: it builds no sources of its own."""
    from gpuherd.record.dashboard import DashboardRecording, record_options
    from gpuherd.record.recording import Recording, RecordingOptions

    shown = DashboardRecording(tmp_path / "s", record_options(["a.log"], [], [], 1.0, 0.0))
    assert shown.recording.sources is None
    headless = Recording(tmp_path / "h", RecordingOptions(logs=["a.log"]))
    assert headless.sources is not None  # a headless recording runs its own set
    headless.sources.close()


def test_a_source_whose_thread_ended_is_not_run_again() -> None:
    """The dashboard runs its set again on mount: a source that already ended stays ended,
    even after later tails started (and the ended thread was forgotten)."""
    ended = FakeCollector([], name="nvml")
    running = RunningSet([ended])
    running.run()
    _wait(running)
    running.start(FakeCollector([], name="log:/r/a.log"))  # forgets the ended thread
    _wait(running)
    running.run()
    _wait(running)
    assert ended.opened == 1
    running.stop(timeout_s=10)

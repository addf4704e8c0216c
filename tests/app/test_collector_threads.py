"""The dashboard's collector threads without the app, and the gate for those started before it."""

from __future__ import annotations

import getpass
import subprocess
import threading
import time

from collectors.base import Crashed, Finished, Sampled
from collectors.machine.host import HostCollector, PidWatch
from collectors.machine.nvml import NvmlCollector, ProcessEntry
from collectors.samples import HostSample
from gpuherd.engine.gate import EarlyCollectors
from gpuherd.engine.threads import SourceThreads as CollectorThreads
from tests.app.helpers import ScriptedCollector, scripted_log
from tests.fakes import FakeCollector, FakeGpu, FakeNvml


class Recorder:
    def __init__(self) -> None:
        self.events: list[object] = []
        self.crashes: list[tuple[str, BaseException, str]] = []

    def emit(self, event: object) -> None:
        self.events.append(event)

    def crashed(self, source: str, error: BaseException) -> None:
        self.crashes.append((source, error, threading.current_thread().name))


class Stuck:
    """A collector whose `sample()` blocks until released, deaf to `wake()` (a hung driver)."""

    name = "stuck"
    interval_s = 0.0

    def __init__(self) -> None:
        self.release = threading.Event()

    def open(self) -> None:
        pass

    def sample(self) -> object:
        self.release.wait(30)
        return 1

    def close(self) -> None:
        pass


def test_each_collector_runs_on_a_daemon_thread_named_after_it_until_stopped() -> None:
    seen = Recorder()
    threads = CollectorThreads(seen.emit, seen.crashed)
    sources = [scripted_log(f"/runs/{i}.log") for i in range(40)]
    handles = [threads.start(source) for source in sources]
    assert all(h.thread.daemon and h.thread.name == h.collector.name for h in handles)
    sources[7].push("a sample")
    deadline = time.monotonic() + 10
    while Sampled("log:/runs/7.log", "a sample") not in seen.events:
        assert time.monotonic() < deadline, "the pushed sample never came"
        time.sleep(0.01)
    assert sorted(threads.alive()) == sorted(s.name for s in sources)  # 40 at once, none queued
    threads.stop(handles[3])
    handles[3].thread.join(10)
    assert not handles[3].thread.is_alive() and "log:/runs/3.log" not in threads.alive()
    assert threads.stop_all(timeout_s=10) == []
    assert threads.alive() == []
    assert seen.crashes == []


def test_a_bug_in_a_collector_reaches_the_crash_handler_with_its_exception() -> None:
    seen = Recorder()
    threads = CollectorThreads(seen.emit, seen.crashed)
    bug = ZeroDivisionError("division by zero in sample")
    handle = threads.start(FakeCollector([1, bug, 2], name="host"))
    handle.thread.join(10)
    assert seen.events == [Sampled("host", 1)]
    assert seen.crashes == [("host", bug, "host")]
    # A source that simply ends is no crash.
    ended = threads.start(FakeCollector([5], name="replay"))
    ended.thread.join(10)
    assert seen.events[-1] == Finished("replay") and len(seen.crashes) == 1


def test_stop_all_gives_up_on_a_stuck_collector_and_names_it() -> None:
    seen = Recorder()
    threads = CollectorThreads(seen.emit, seen.crashed)
    stuck = Stuck()
    threads.start(stuck)
    threads.start(ScriptedCollector("nvml"))
    try:
        assert threads.stop_all(timeout_s=0.5) == ["stuck"]
        assert threads.alive() == ["stuck"]
    finally:
        stuck.release.set()
    assert threads.stop_all(timeout_s=10) == []


def test_a_closed_gate_holds_events_and_crashes_in_order_until_it_opens() -> None:
    tapped: list[object] = []
    bug = ZeroDivisionError("a bug in sample")
    early = EarlyCollectors.start(
        [FakeCollector([1, 2, 3], name="a"), FakeCollector([bug], name="b")], tap=tapped.append
    )
    assert early.threads.stop_all(timeout_s=10) == []  # both sources ended by themselves
    assert not early.gate.is_open
    seen = Recorder()
    held = early.gate.open(seen.emit, seen.crashed)
    assert [e for e in held if getattr(e, "source", None) == "a"] == [
        Sampled("a", 1),
        Sampled("a", 2),
        Sampled("a", 3),
        Finished("a"),
    ]
    assert [e for e in held if getattr(e, "source", None) == "b"] == [Crashed("b", bug)]
    # The tap is a sink of the running set like the gate: it gets every event, crashes too.
    assert sorted(map(repr, tapped)) == sorted(repr(e) for e in held)
    assert seen.events == [] and seen.crashes == []  # handed over once, as the return value
    # Open: a collector started now reaches the sink directly, crashes too.
    late = early.threads.start(FakeCollector([9, bug], name="c"))
    late.thread.join(10)
    assert seen.events == [Sampled("c", 9)] and seen.crashes == [("c", bug, "c")]
    assert early.gate.open(seen.emit, seen.crashed) == []
    assert tapped[-2:] == [Sampled("c", 9), Crashed("c", bug)]


def test_collectors_started_early_are_stopped_when_no_app_takes_them() -> None:
    source = ScriptedCollector("nvml")
    early = EarlyCollectors.start([source])
    assert early.threads.alive() == ["nvml"]
    early.abandon()
    assert early.threads.alive() == []
    taken = EarlyCollectors.start([ScriptedCollector("nvml")])
    taken.gate.open(Recorder().emit, Recorder().crashed)
    taken.abandon()  # an app took them over: stopping them is its job
    assert taken.threads.alive() == ["nvml"]
    assert taken.threads.stop_all(timeout_s=10) == []


def test_a_gpu_process_gets_its_user_while_the_gate_is_still_closed() -> None:
    """While the dashboard loads, a GPU tick's pids already wake the host collector."""
    child = subprocess.Popen(["sleep", "600"])
    watch = PidWatch()
    nvml = NvmlCollector(
        FakeNvml([FakeGpu(compute=[ProcessEntry(child.pid, 4 << 30)])]), interval_s=600.0
    )
    host = HostCollector(watch, interval_s=600.0)  # a second sample only by waking
    detailed = threading.Event()

    def tap(event: object) -> None:
        sample = getattr(event, "sample", None)
        if isinstance(sample, HostSample) and any(
            p.pid == child.pid and p.user == getpass.getuser() for p in sample.processes
        ):
            detailed.set()

    early = EarlyCollectors.start([nvml, host], tap=tap, pid_watch=watch)
    try:
        assert detailed.wait(10), "the GPU process was not detailed before the gate opened"
        assert watch.get() == {child.pid}
        held = early.gate.open(Recorder().emit, Recorder().crashed)
        kinds = [type(e.sample).__name__ for e in held if isinstance(e, Sampled)]
        assert kinds.count("GpuTick") == 1 and kinds[-1] == "HostSample"
        assert kinds.index("GpuTick") < len(kinds) - 1  # the details came after the tick
    finally:
        early.threads.stop_all(timeout_s=10)
        child.kill()
        child.wait()

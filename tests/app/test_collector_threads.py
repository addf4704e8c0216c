"""The dashboard's collector threads, without the app: start, stop, crash, and a stuck source."""

from __future__ import annotations

import threading
import time

from collectors.base import Finished, Sampled
from tests.app.helpers import ScriptedCollector, scripted_log
from tests.fakes import FakeCollector
from tui.collector_threads import CollectorThreads


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

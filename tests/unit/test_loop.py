from __future__ import annotations

import threading

from collectors.base import (
    CollectorError,
    CollectorUnavailable,
    Failed,
    Finished,
    Recovered,
    Sampled,
    SourceExhausted,
    Unavailable,
)
from collectors.loop import run_collector, wake_collectors


class ScriptedCollector:
    """Returns or raises the scripted items in order, then reports exhaustion."""

    def __init__(self, script, unavailable: bool = False) -> None:
        self.name = "scripted"
        self.interval_s = 0.0
        self.script = list(script)
        self.unavailable = unavailable
        self.opened = self.closed = 0

    def open(self) -> None:
        self.opened += 1
        if self.unavailable:
            raise CollectorUnavailable("no driver here", title="NVML")

    def sample(self):
        if not self.script:
            raise SourceExhausted("done")
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.closed += 1


def run(collector):
    events = []
    run_collector(collector, events.append, threading.Event())
    return events


def test_samples_errors_and_recovery_arrive_in_order():
    collector = ScriptedCollector([1, CollectorError("lost"), CollectorError("lost"), 2])
    events = run(collector)
    assert [type(e) for e in events] == [Sampled, Failed, Failed, Recovered, Sampled, Finished]
    assert events[0].sample == 1 and events[4].sample == 2
    assert events[1].error.msg == "lost"
    assert collector.closed == 1


def test_unavailable_source_reports_once_and_closes():
    collector = ScriptedCollector([1], unavailable=True)
    events = run(collector)
    assert len(events) == 1 and isinstance(events[0], Unavailable)
    assert events[0].error.title == "NVML"
    assert collector.closed == 1


def test_stop_event_ends_the_loop_without_sampling():
    collector = ScriptedCollector([1, 2, 3])
    stop = threading.Event()
    stop.set()
    events: list = []
    run_collector(collector, events.append, stop)
    assert events == [] and collector.closed == 1


def test_a_bug_in_a_collector_propagates_and_still_closes():
    collector = ScriptedCollector([ZeroDivisionError("bug")])
    try:
        run(collector)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("a non-collector exception must reach the worker's error handler")
    assert collector.closed == 1


def test_slow_sample_shortens_the_wait():
    ticks = iter([0.0, 0.7, 1.0, 1.0])
    waits = []

    class Stop(threading.Event):
        def wait(self, timeout=None):
            waits.append(timeout)
            return False

    collector = ScriptedCollector([1])
    collector.interval_s = 1.0
    run_collector(collector, lambda e: None, Stop(), clock=lambda: next(ticks))
    assert waits == [0.30000000000000004] or abs(waits[0] - 0.3) < 1e-9


class WakeableCollector(ScriptedCollector):
    """Samples forever with a long interval; `wake()` cuts the pause short."""

    def __init__(self) -> None:
        super().__init__([])
        self.interval_s = 60.0
        self.wakeup = threading.Event()
        self.samples = 0

    def sample(self):
        self.samples += 1
        return self.samples

    def wake(self) -> None:
        self.wakeup.set()


def test_a_wakeup_asks_for_a_sample_before_the_interval_ends():
    collector = WakeableCollector()
    stop = threading.Event()
    events: list = []
    thread = threading.Thread(target=run_collector, args=(collector, events.append, stop))
    thread.start()
    try:
        for wanted in (1, 2, 3):
            if wanted > 1:
                collector.wakeup.set()
            deadline = threading.Event()
            for _ in range(500):  # 5 s at most, where the interval is 60 s
                if len(events) >= wanted:
                    break
                deadline.wait(0.01)
            assert [e.sample for e in events] == list(range(1, wanted + 1))
    finally:
        stop.set()
        wake_collectors([collector, object()])  # an object without wake() is passed over
        thread.join(5)
    assert not thread.is_alive() and collector.closed == 1
    assert len(events) == 3

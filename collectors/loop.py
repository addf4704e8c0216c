"""The one polling loop every collector runs in, in the TUI and in `--record` alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from collectors.base import (
    Collector,
    CollectorError,
    CollectorEvent,
    CollectorUnavailable,
    Failed,
    Finished,
    Recovered,
    Sampled,
    SourceExhausted,
    Unavailable,
)

Emit = Callable[[CollectorEvent], None]


def run_collector(
    collector: Collector[Any],
    emit: Emit,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Open `collector`, then sample it every `interval_s` until `stop` is set.

    The wait after a sample is `interval_s` minus the time the sample took, so a slow source
    delays its next tick instead of stacking threads. A collector with a `wakeup` event waits
    on that instead of on `stop`, so it can be asked for a sample early; whoever sets `stop`
    then also calls its `wake()` (a stopping app or recorder does, for every collector). Any
    exception other than the collector errors is a bug and propagates to the caller (the
    thread's crash handler, which reports it).
    """
    wakeup: threading.Event | None = getattr(collector, "wakeup", None)
    try:
        collector.open()
    except CollectorUnavailable as error:
        emit(Unavailable(collector.name, error))
        collector.close()
        return
    failing = False
    try:
        # A replayed source whose first sample was recorded later than the session's start
        # (a log's first metric a minute in) waits for it, as for every later sample.
        delay = getattr(collector, "start_delay_s", 0.0)
        if delay > 0:
            (stop if wakeup is None else wakeup).wait(delay)
        while not stop.is_set():
            started = clock()
            try:
                sample = collector.sample()
            except SourceExhausted:
                emit(Finished(collector.name))
                return
            except CollectorError as error:
                failing = True
                emit(Failed(collector.name, error))
            else:
                if failing:
                    failing = False
                    emit(Recovered(collector.name))
                emit(Sampled(collector.name, sample))
            pause = max(0.0, collector.interval_s - (clock() - started))
            if wakeup is None:
                stop.wait(pause)
            else:
                wakeup.wait(pause)
                wakeup.clear()
    finally:
        collector.close()


def wake_collectors(collectors: Iterable[object]) -> None:
    """Cut short the wait of every collector that can be woken (after setting their `stop`).

    A log tail waits for its file inside `sample`, a host collector on its `wakeup` event:
    without this a stopping app or recorder waits up to a poll interval for each.
    """
    for collector in collectors:
        wake = getattr(collector, "wake", None)
        if callable(wake):
            wake()

"""The one module that runs collectors: each on a plain daemon thread of its own.

Not Textual thread workers: those share asyncio's default executor of min(32, cpu_count + 4)
threads, so on a 2-core host the fifth long-lived collector never started, and a short job
queued behind them (closing a recording) never ran. Every sink (the dashboard, the recorder,
the exporter, the queue runner, the fast peak sampler) runs its sources through here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.base import Collector
from collectors.loop import Emit, run_collector, wake_collectors

STOP_WAIT_S = 5.0
"""At exit, how long the collectors together get to finish their current sample and close."""

Crash = Callable[[str, BaseException], None]
"""Called on a collector's thread when its loop ends in a bug: the name and the exception."""


@dataclass(eq=False)
class CollectorThread:
    """One running collector: its thread and the event that stops it."""

    collector: Collector[Any]
    stop: threading.Event
    thread: threading.Thread


class SourceThreads:
    """Starts and stops the threads that run collectors, one thread per collector.

    Each thread is named after its collector (behind `prefix`) and runs `run_collector` until
    its `stop` event is set. Safe to call from any thread.

    Args:
        emit: Gets every collector event, on the collector's thread.
        crashed: Called on the collector's thread when its loop ends in an unexpected
            exception (a bug), with the collector's name and the exception.
        prefix: Put before each thread's name (`record:`), so a stack dump tells sinks apart.
    """

    def __init__(self, emit: Emit, crashed: Crash, prefix: str = "") -> None:
        self._emit = emit
        self._crashed = crashed
        self._prefix = prefix
        self._running: list[CollectorThread] = []
        self._lock = threading.Lock()

    def start(
        self, collector: Collector[Any], stop: threading.Event | None = None
    ) -> CollectorThread:
        """Run `collector` on a new daemon thread until `stop` (a new event by default) is set."""
        stop = stop if stop is not None else threading.Event()
        thread = threading.Thread(
            target=self._run,
            args=(collector, stop),
            name=f"{self._prefix}{collector.name}",
            daemon=True,
        )
        handle = CollectorThread(collector, stop, thread)
        with self._lock:
            self._running = [h for h in self._running if h.thread.is_alive()]
            self._running.append(handle)
        thread.start()
        return handle

    def stop(self, handle: CollectorThread) -> None:
        """Ask one collector to stop, cutting its current wait short; does not wait for it."""
        handle.stop.set()
        wake_collectors([handle.collector])

    def stop_all(self, timeout_s: float = STOP_WAIT_S) -> list[str]:
        """Stop every collector and wait up to `timeout_s` in all for their threads to end.

        Returns:
            The names of collectors still running (stuck in a blocking call); their threads
            are daemons and are abandoned.
        """
        with self._lock:
            running = list(self._running)
        for handle in running:
            handle.stop.set()
        wake_collectors(h.collector for h in running)
        deadline = time.monotonic() + timeout_s
        for handle in running:
            handle.thread.join(max(0.0, deadline - time.monotonic()))
        return [h.collector.name for h in running if h.thread.is_alive()]

    def running(self, collector: Collector[Any]) -> bool:
        """Whether `collector` was started here (its thread may have ended since)."""
        with self._lock:
            return any(h.collector is collector for h in self._running)

    def find(self, name: str) -> Collector[Any] | None:
        """The collector started here under `name`, if any (the newest one)."""
        with self._lock:
            return next(
                (h.collector for h in reversed(self._running) if h.collector.name == name), None
            )

    def find_by(self, attribute: str, value: object) -> Collector[Any] | None:
        """The newest collector started here whose `attribute` is `value`, if any."""
        with self._lock:
            return next(
                (
                    h.collector
                    for h in reversed(self._running)
                    if getattr(h.collector, attribute, None) == value
                ),
                None,
            )

    def alive(self) -> list[str]:
        """The names of the collectors whose threads still run."""
        with self._lock:
            return [h.collector.name for h in self._running if h.thread.is_alive()]

    def all_ended(self) -> bool:
        """Whether every thread started here has ended (finite sources ran out, or all failed)."""
        with self._lock:
            return all(not h.thread.is_alive() for h in self._running)

    def _run(self, collector: Collector[Any], stop: threading.Event) -> None:
        try:
            run_collector(collector, self._emit, stop)
        except BaseException as error:  # a bug: reported to the sink, never lost with the thread
            self._crashed(collector.name, error)


def run_here(collector: Collector[Any], emit: Emit, stop: threading.Event) -> None:
    """Run `collector` on the calling thread until `stop` is set (the queue runner's one GPU)."""
    run_collector(collector, emit, stop)

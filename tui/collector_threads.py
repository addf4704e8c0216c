"""The dashboard's long-lived collectors, each on a plain daemon thread of its own."""

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


@dataclass(eq=False)
class CollectorThread:
    """One running collector: its thread and the event that stops it."""

    collector: Collector[Any]
    stop: threading.Event
    thread: threading.Thread


class CollectorThreads:
    """Starts and stops the threads that run the dashboard's collectors.

    Not Textual thread workers: those share asyncio's default executor of
    min(32, cpu_count + 4) threads, so on a 2-core host the fifth long-lived collector never
    started, and a short job queued behind them (closing a recording) never ran. Each thread
    is named after its collector and runs `run_collector` until its `stop` event is set.

    Args:
        emit: Gets every collector event, on the collector's thread.
        crashed: Called on the collector's thread when its loop ends in an unexpected
            exception (a bug), with the collector's name and the exception.
    """

    def __init__(self, emit: Emit, crashed: Callable[[str, BaseException], None]) -> None:
        self._emit = emit
        self._crashed = crashed
        self._running: list[CollectorThread] = []

    def start(self, collector: Collector[Any]) -> CollectorThread:
        """Run `collector` on a new daemon thread until `stop` or `stop_all`."""
        stop = threading.Event()
        thread = threading.Thread(target=self._run, args=(collector, stop), name=collector.name,
                                  daemon=True)
        handle = CollectorThread(collector, stop, thread)
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
        running = list(self._running)
        for handle in running:
            handle.stop.set()
        wake_collectors(h.collector for h in running)
        deadline = time.monotonic() + timeout_s
        for handle in running:
            handle.thread.join(max(0.0, deadline - time.monotonic()))
        return [h.collector.name for h in running if h.thread.is_alive()]

    def alive(self) -> list[str]:
        """The names of the collectors whose threads still run."""
        return [h.collector.name for h in self._running if h.thread.is_alive()]

    def _run(self, collector: Collector[Any], stop: threading.Event) -> None:
        try:
            run_collector(collector, self._emit, stop)
        except BaseException as error:  # a bug: reported to the app, never lost with the thread
            self._crashed(collector.name, error)

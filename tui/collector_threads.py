"""The dashboard's long-lived collectors, each on a plain daemon thread of its own.

This module never imports Textual: the live dashboard starts its collectors here before the
app (and Textual with it) is loaded, and holds their first events until the app can take them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from collectors.base import Collector, CollectorEvent, Crashed, Sampled
from collectors.host import gpu_pids
from collectors.loop import Emit, run_collector, wake_collectors
from collectors.samples import GpuTick

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

    def running(self, collector: Collector[Any]) -> bool:
        """Whether `collector` was started here (its thread may have ended since)."""
        return any(h.collector is collector for h in self._running)

    def alive(self) -> list[str]:
        """The names of the collectors whose threads still run."""
        return [h.collector.name for h in self._running if h.thread.is_alive()]

    def _run(self, collector: Collector[Any], stop: threading.Event) -> None:
        try:
            run_collector(collector, self._emit, stop)
        except BaseException as error:  # a bug: reported to the app, never lost with the thread
            self._crashed(collector.name, error)


Crash = Callable[[str, BaseException], None]
"""Called on a collector's thread when its loop ends in a bug: the name and the exception."""


class PidSink(Protocol):
    """Where the pids seen on the GPUs go (`collectors.host.PidWatch`)."""

    def set(self, pids: Iterable[int]) -> None:
        """Replace the watched pids."""


class EventGate:
    """Collector events (and crash reports) held in order until the dashboard opens the gate.

    The live dashboard starts its collectors before it imports Textual, which takes about a
    third of a second, so the first GPU tick and the details of its processes are ready when
    the first frame is drawn instead of a frame or two later. `open` hands the held events
    over, in the order they came, and sends every later one straight on.

    Args:
        tap: Also gets every event at once, on the collector's thread, held or not (the
            recording of `record --tui`).
        pid_watch: While the gate is closed, gets the pids of every GPU tick at once, so the
            host collector details those processes while the app loads; from `open` on the
            app does that.
    """

    def __init__(self, tap: Emit | None = None, pid_watch: PidSink | None = None) -> None:
        self._tap = tap
        self._pid_watch = pid_watch
        self._lock = threading.Lock()
        self._held: list[CollectorEvent] = []
        self._emit: Emit | None = None
        self._crashed: Crash | None = None

    @property
    def is_open(self) -> bool:
        """Whether `open` was called: events go straight to the sink."""
        with self._lock:
            return self._emit is not None

    def emit(self, event: CollectorEvent) -> None:
        """The sink of every collector loop: safe to call from any thread."""
        if self._tap is not None:
            self._tap(event)
        with self._lock:
            emit = self._emit
            if emit is None:
                self._held.append(event)
                # Under the lock, so no held tick can set its pids after the app set newer
                # ones (PidWatch calls nothing back).
                if (self._pid_watch is not None and isinstance(event, Sampled)
                        and isinstance(event.sample, GpuTick)):
                    self._pid_watch.set(gpu_pids(event.sample))
        if emit is not None:
            emit(event)

    def crashed(self, source: str, error: BaseException) -> None:
        """A collector's loop ended in a bug: reported now if open, else held as `Crashed`."""
        with self._lock:
            crashed = self._crashed
            if crashed is None:
                self._held.append(Crashed(source, error))
        if crashed is not None:
            crashed(source, error)

    def open(self, emit: Emit, crashed: Crash) -> list[CollectorEvent]:
        """From now on send events to `emit` and crashes to `crashed`; the held events.

        The caller handles the returned events (a `Crashed` among them as a crash report)
        before any event that `emit` gets from now on.
        """
        with self._lock:
            self._emit, self._crashed = emit, crashed
            held, self._held = self._held, []
        return held


@dataclass(eq=False)
class EarlyCollectors:
    """Collectors started before the dashboard exists; it adopts their threads and events."""

    threads: CollectorThreads
    gate: EventGate

    @classmethod
    def start(cls, collectors: Sequence[Collector[Any]], *, tap: Emit | None = None,
              pid_watch: PidSink | None = None) -> EarlyCollectors:
        """Start one thread per collector, their events held by a closed gate."""
        gate = EventGate(tap, pid_watch)
        threads = CollectorThreads(gate.emit, gate.crashed)
        for collector in collectors:
            threads.start(collector)
        return cls(threads, gate)

    def abandon(self) -> None:
        """Stop the threads when no dashboard took them over (it failed to start)."""
        if not self.gate.is_open:
            self.threads.stop_all()

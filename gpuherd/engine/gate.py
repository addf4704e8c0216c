"""The dashboard's sink before it exists: a source set started early, its events held in order.

The live dashboard starts its sources before it imports Textual, which takes about a third of a
second, so the first GPU tick and the details of its processes are ready when the first frame
is drawn instead of a frame or two later. No Textual here.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collectors.base import Collector, CollectorEvent, Crashed
from collectors.loop import Emit
from gpuherd.engine.running import PidSink, RunningSet
from gpuherd.engine.threads import Crash, SourceThreads

if TYPE_CHECKING:
    from collectors.machine.writers import WriterWatch
    from gpuherd.sources import TailSupervisor


class EventGate:
    """Collector events (and crash reports) held in order until the dashboard opens the gate.

    `open` hands the held events over, in the order they came, and sends every later one
    straight on; a `Crashed` event then goes to the `crashed` callback.

    Args:
        tap: Also gets every event at once, on the collector's thread, held or not.
    """

    def __init__(self, tap: Emit | None = None) -> None:
        self._tap = tap
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
            emit, crashed = self._emit, self._crashed
            if emit is None:
                self._held.append(event)
        if isinstance(event, Crashed) and crashed is not None:
            crashed(event.source, event.error)
        elif emit is not None:
            emit(event)

    def crashed(self, source: str, error: BaseException) -> None:
        """A collector's loop ended in a bug: reported now if open, else held as `Crashed`."""
        self.emit(Crashed(source, error))

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
    """A running set whose events wait at a gate until the dashboard takes them over."""

    running: RunningSet
    gate: EventGate

    @property
    def threads(self) -> SourceThreads:
        """The threads of the running set."""
        return self.running.threads

    @classmethod
    def create(
        cls,
        collectors: Sequence[Collector[Any]],
        *,
        taps: Sequence[Emit] = (),
        pid_watch: PidSink | None = None,
        tails: TailSupervisor | None = None,
        writers: WriterWatch | None = None,
    ) -> EarlyCollectors:
        """The set of `collectors`, its events going to `taps` and held at a closed gate."""
        running = RunningSet(collectors, pid_watch=pid_watch, tails=tails, writers=writers)
        for tap in taps:
            running.attach(tap)
        gate = EventGate()
        running.attach(gate.emit)
        return cls(running, gate)

    @classmethod
    def start(
        cls,
        collectors: Sequence[Collector[Any]],
        *,
        tap: Emit | None = None,
        pid_watch: PidSink | None = None,
        tails: TailSupervisor | None = None,
        writers: WriterWatch | None = None,
    ) -> EarlyCollectors:
        """Start one thread per collector, their events held by a closed gate."""
        early = cls.create(
            collectors,
            taps=[tap] if tap is not None else [],
            pid_watch=pid_watch,
            tails=tails,
            writers=writers,
        )
        early.running.run()
        return early

    def abandon(self) -> None:
        """Stop the threads when no dashboard took them over (it failed to start)."""
        if not self.gate.is_open:
            self.running.stop()

"""A source set running: every source on its own thread, wired to the others, fed to the sinks.

This is the one driver of sources. What sources tell each other is wired here, on the
source's thread, before any sink sees the event, so that every sink gets it without writing it:

- a GPU tick's pids go to the host collector's `PidWatch` (it details those processes) and to
  the `WriterWatch` (which process writing a log holds a GPU);
- a log batch tells the `WriterWatch` which file a task reads;
- a discovery scan goes to the `TailSupervisor`, which starts a tail per new log here and
  stops the tails of vanished runs; the scan reaches the sinks annotated with what changed.

A sink is a callable taking a `CollectorEvent` (`attach`). It only consumes: it never starts a
source, never tells one source about another.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from collectors.base import Collector, CollectorEvent, Crashed, Sampled
from collectors.loop import Emit
from collectors.machine.host import gpu_pids
from collectors.samples import DiscoveredLogs, GpuTick, LogBatch
from gpuherd.engine.threads import STOP_WAIT_S, CollectorThread, SourceThreads

if TYPE_CHECKING:
    from collectors.machine.writers import WriterWatch
    from gpuherd.sources import TailSupervisor


class PidSink(Protocol):
    """Where the pids seen on the GPUs go (`collectors.machine.host.PidWatch`)."""

    def set(self, pids: Iterable[int]) -> None:
        """Replace the watched pids."""


class RunningSet:
    """Runs `collectors` (and the tails their scans find) until `stop`; events go to sinks.

    Args:
        collectors: The sources to start with `run` (the composition root lists them).
        pid_watch: Told the pids of every GPU tick (the host collector reads it).
        tails: Decides which logs get a tail; the tails run here.
        writers: Told which files the tasks read and which pids hold a GPU.
        keep_vanished: Keep the tail of a run whose directory vanished (a recording reads
            what it can); otherwise it is stopped.
        prefix: Before each thread's name (`record:`).
        stop: One event that stops every source when set (a recording that fails to write);
            by default each source has its own.
    """

    def __init__(
        self,
        collectors: Sequence[Collector[Any]] = (),
        *,
        pid_watch: PidSink | None = None,
        tails: TailSupervisor | None = None,
        writers: WriterWatch | None = None,
        keep_vanished: bool = False,
        prefix: str = "",
        stop: threading.Event | None = None,
    ) -> None:
        self.collectors = list(collectors)
        self.pid_watch, self.tails, self.writers = pid_watch, tails, writers
        self.threads = SourceThreads(self._emit, self._crashed, prefix)
        self._sinks: tuple[Emit, ...] = ()
        self._lock = threading.Lock()
        self._stopping = False
        self._started: set[int] = set()
        """`id` of every source started here: a source whose thread ended is not run again."""
        self._stop_event = stop
        if tails is not None:
            tails.attach(self.start, None if keep_vanished else self._stop_tail)

    def attach(self, sink: Emit) -> None:
        """Send every later event to `sink`, on the source's thread (it must be thread-safe)."""
        with self._lock:
            self._sinks = (*self._sinks, sink)

    def detach(self, sink: Emit) -> None:
        """Stop sending events to `sink`."""
        with self._lock:
            self._sinks = tuple(s for s in self._sinks if s != sink)  # bound methods: equal

    def run(self) -> None:
        """Start every source of the set that is not running yet, each on its own thread."""
        for collector in list(self.collectors):
            if not self.running(collector):
                self.start(collector)

    def start(self, collector: Collector[Any]) -> CollectorThread | bool:
        """Run one more source (a tail for a log found later); False once the set is stopping."""
        with self._lock:
            if self._stopping:
                return False
            if collector not in self.collectors:
                self.collectors.append(collector)
            self._started.add(id(collector))
        return self.threads.start(collector, self._stop_event)

    @property
    def stopped(self) -> bool:
        """Whether `stop` was called."""
        with self._lock:
            return self._stopping

    def running(self, collector: Collector[Any]) -> bool:
        """Whether `collector` was started (its thread may have ended since)."""
        with self._lock:
            return id(collector) in self._started

    def find(self, name: str) -> Collector[Any] | None:
        """The started source named `name`, if any."""
        return self.threads.find(name)

    def find_task(self, task_id: str) -> Collector[Any] | None:
        """The started tail that feeds `task_id`, if any."""
        return self.threads.find_by("task_id", task_id)

    def done(self) -> bool:
        """Whether every source's thread has ended (finite sources ran out, or all failed)."""
        return self.threads.all_ended()

    def stop(self, timeout_s: float = STOP_WAIT_S) -> list[str]:
        """Stop every source; no source starts after this. The names of those stuck."""
        with self._lock:
            self._stopping = True
        return self.threads.stop_all(timeout_s)

    def _stop_tail(self, handle: Any) -> None:
        if isinstance(handle, CollectorThread):
            self.threads.stop(handle)

    def wire(self, event: CollectorEvent) -> CollectorEvent:
        """What one source's event tells the others; the event as the sinks get it."""
        if not isinstance(event, Sampled):
            return event
        sample = event.sample
        if isinstance(sample, GpuTick):
            pids = gpu_pids(sample)
            if self.pid_watch is not None:
                self.pid_watch.set(pids)
            if self.writers is not None:
                self.writers.set_gpu_pids(pids)
        elif isinstance(sample, LogBatch):
            # A tail stopped with its vanished run may still hand in what it read last.
            if (
                self.writers is not None
                and sample.file_path
                and (self.tails is None or self.tails.is_followed(sample.path))
            ):
                self.writers.follow(sample.path, sample.file_path, sample.format)
        elif isinstance(sample, DiscoveredLogs) and self.tails is not None:
            return Sampled(event.source, self.discovered(sample))
        return event

    def discovered(self, found: DiscoveredLogs) -> DiscoveredLogs:
        """Let the supervisor start and stop tails for a scan; the scan with what changed."""
        assert self.tails is not None
        changed = self.tails.discovered(found)
        if self.writers is not None:
            for task_id in changed.stopped:
                self.writers.forget(task_id)
        return dataclasses.replace(
            found,
            started=tuple(log.task_id for log in changed.started),
            stopped=changed.stopped,
            first_scan=changed.first_scan,
        )

    def _emit(self, event: CollectorEvent) -> None:
        event = self.wire(event)
        with self._lock:
            sinks = self._sinks
        for sink in sinks:
            sink(event)

    def _crashed(self, source: str, error: BaseException) -> None:
        self._emit(Crashed(source, error))

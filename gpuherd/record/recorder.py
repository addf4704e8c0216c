"""The headless recording core: collectors on plain threads, one writer thread, no Textual."""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from collectors.base import (
    Collector,
    CollectorEvent,
    Crashed,
    Failed,
    Finished,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.loop import run_collector, wake_collectors
from collectors.samples import ContainerTick, GpuTick, HostSample
from collectors.session_format import EVENT
from gpuherd.session import SessionWriteError, SessionWriter

Handler = Callable[[SessionWriter, Any], None]
"""Writes one sample of a further type (for example a parsed log metric) to the session."""


class PidSink(Protocol):
    """Where the pids seen on the GPUs go (`collectors.host.PidWatch`)."""

    def set(self, pids: Iterable[int]) -> None:
        """Replace the watched pids."""


_STOP = object()


class Recorder:
    """Runs collectors on daemon threads and writes what they produce to a `SessionWriter`.

    Every collector thread only puts events on a queue; one writer thread takes them off and
    owns the `SessionWriter`. A queue rather than a lock around the writer, so that a slow
    fsync (a busy disk, NFS) never delays a collector's next sample (the fast peak sampler
    relies on that), and the writer's files and csv writers stay on one thread.

    A failed write (disk full) stops the recording: `error` is set and `stop` is set, so whoever
    waits on `stop` wakes up. `emit` is public so a dashboard that already runs the collectors
    (`--tui --record`) can feed the same recorder with no collector threads of its own.
    """

    def __init__(self, writer: SessionWriter, collectors: Sequence[Collector[Any]] = (), *,
                 pid_watch: PidSink | None = None,
                 peaks: Callable[[GpuTick], Mapping[str, int]] | None = None,
                 handlers: Mapping[type, Handler] | None = None,
                 stop: threading.Event | None = None,
                 tap: Callable[[CollectorEvent], None] | None = None) -> None:
        self.writer = writer
        self.collectors = tuple(collectors)
        self.stop_event = stop if stop is not None else threading.Event()
        """Set to end the recording; the recorder sets it itself when writing fails."""
        self.error: SessionWriteError | None = None
        """Why recording stopped early, if it did."""
        self.problems: list[str] = []
        """Bugs met while recording (a collector or handler raised); also in `events.jsonl`."""
        self._pid_watch, self._peaks, self._tap = pid_watch, peaks, tap
        self._sample_writers: dict[type, Callable[[Any], None]] = {
            GpuTick: self._write_tick,
            HostSample: writer.write_host,
            ContainerTick: writer.write_containers,
            **{kind: partial(handler, writer) for kind, handler in (handlers or {}).items()},
        }
        """How each sample type is written; a type not listed is noted once in the events."""
        self._event_writers: dict[type, Callable[[Any], None]] = {
            Sampled: self._write_sampled, Failed: self._write_failed,
            Recovered: self._write_recovered, Unavailable: self._write_unavailable,
            Finished: self._write_finished, Crashed: self._write_crashed,
        }
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._failing: dict[str, str] = {}
        self._unknown: set[type] = set()
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()
        self._started = False
        self._writer_thread = threading.Thread(target=self._write_loop, name="record:writer",
                                               daemon=True)

    def start(self) -> None:
        """Start the writer thread and one thread per collector."""
        self._writer_thread.start()
        with self._threads_lock:
            self._started = True
            for collector in self.collectors:
                self._start_thread(collector)

    def add_collector(self, collector: Collector[Any]) -> bool:
        """Run one more collector (a log found while recording); safe from any thread.

        Returns False, and starts nothing, once the recording is stopping.
        """
        with self._threads_lock:
            if self.stop_event.is_set():
                return False
            self.collectors += (collector,)
            if self._started:
                self._start_thread(collector)
            return True

    def _start_thread(self, collector: Collector[Any]) -> None:
        thread = threading.Thread(target=self._collect, args=(collector,),
                                  name=f"record:{collector.name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def emit(self, event: CollectorEvent) -> None:
        """The sink of every collector loop: safe to call from any thread."""
        if self._pid_watch is not None and isinstance(event, Sampled):
            if isinstance(event.sample, GpuTick):
                tick = event.sample
                self._pid_watch.set({p.pid for d in tick.devices for p in d.processes or ()})
        if self._tap is not None:
            self._tap(event)
        self._queue.put(event)

    def collectors_done(self) -> bool:
        """Whether every collector thread has ended (finite sources ran out, or all failed)."""
        with self._threads_lock:
            return all(not t.is_alive() for t in self._threads)

    def shutdown(self, timeout_s: float = 5.0, writer_timeout_s: float = 60.0) -> bool:
        """Stop the collectors, write what they produced, and stop the writer thread.

        The writer itself is left open: the caller closes it with the final metadata, and may
        do so only when this returns True (the writer thread has ended; otherwise it is still
        busy, for example stuck in an fsync on a hung network filesystem). A collector stuck in
        a blocking call is abandoned after `timeout_s` (its thread is a daemon); whatever it
        emits later is not written.
        """
        with self._threads_lock:  # no collector is added after this
            self.stop_event.set()
            threads = list(self._threads)
            collectors = self.collectors
        wake_collectors(collectors)
        for thread in threads:
            thread.join(timeout_s)
        self._queue.put(_STOP)
        if self._writer_thread.is_alive():
            self._writer_thread.join(writer_timeout_s)
        return not self._writer_thread.is_alive()

    def _collect(self, collector: Collector[Any]) -> None:
        try:
            run_collector(collector, self.emit, self.stop_event)
        except Exception as error:  # a bug in a collector: record it, keep the others going
            self.emit(Crashed(collector.name, error))

    def _write_loop(self) -> None:
        wait_s = max(0.05, min(0.5, self.writer.flush_interval_s / 2))
        while True:
            try:
                item = self._queue.get(timeout=wait_s)
            except queue.Empty:
                item = None
            if item is _STOP:
                return
            try:
                try:
                    if item is not None:
                        self._write(item)
                except SessionWriteError:
                    raise
                except Exception as error:  # a bug in a handler: record it, keep recording
                    self._problem("recorder", error)
                self.writer.flush_if_due()
            except SessionWriteError as error:
                self.error = error
                self.stop_event.set()
                return

    def _write(self, event: object) -> None:
        self._event_writers[type(event)](event)

    def _write_sampled(self, event: Sampled[Any]) -> None:
        kind = type(event.sample)
        writer = self._sample_writers.get(kind)
        if writer is not None:
            writer(event.sample)
        elif kind not in self._unknown:
            self._unknown.add(kind)
            self._event(EVENT.sample_not_recorded, event.source, f"no handler for {kind.__name__}")

    def _write_tick(self, tick: GpuTick) -> None:
        self.writer.write_gpu_tick(tick, self._peaks(tick) if self._peaks is not None else None)

    def _write_failed(self, event: Failed) -> None:
        if self._failing.get(event.source) != event.error.msg:  # once per outage
            self._failing[event.source] = event.error.msg
            self._event(EVENT.collector_failed, event.source, event.error.msg, event.error.title)

    def _write_recovered(self, event: Recovered) -> None:
        self._failing.pop(event.source, None)
        self._event(EVENT.collector_recovered, event.source)

    def _write_unavailable(self, event: Unavailable) -> None:
        self._event(EVENT.collector_unavailable, event.source, event.error.msg, event.error.title)

    def _write_finished(self, event: Finished) -> None:
        self._event(EVENT.collector_finished, event.source)

    def _write_crashed(self, event: Crashed) -> None:
        self._problem(event.source, event.error)

    def _event(self, kind: str, source: str, msg: str | None = None,
               title: str | None = None) -> None:
        event: dict[str, Any] = {"kind": kind, "source": source}
        if msg is not None:
            event["msg"] = msg
        if title is not None:
            event["title"] = title
        self.writer.write_event(event)

    def _problem(self, source: str, error: BaseException) -> None:
        text = f"{source}: {type(error).__name__}: {error}"
        self.problems.append(text)
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.writer.write_event({"kind": EVENT.recorder_bug, "source": source, "msg": text,
                                 "traceback": trace})

"""The headless recording core: collectors on plain threads, one writer thread, no Textual."""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

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
from collectors.samples import ContainerTick, GpuTick, HostSample
from collectors.session.session_format import EVENT
from gpuherd.engine.running import RunningSet
from gpuherd.session.session import SessionWriteError, SessionWriter

if TYPE_CHECKING:
    from gpuherd.sources import TailSupervisor

Handler = Callable[[SessionWriter, Any], None]
"""Writes one sample of a further type (for example a parsed log metric) to the session."""


class PidSink(Protocol):
    """Where the pids seen on the GPUs go (`collectors.machine.host.PidWatch`)."""

    def set(self, pids: Iterable[int]) -> None:
        """Replace the watched pids."""


_STOP = object()


class Recorder:
    """Runs collectors (a `RunningSet`) and writes what they produce to a `SessionWriter`.

    Every collector thread only puts events on a queue; one writer thread takes them off and
    owns the `SessionWriter`. A queue rather than a lock around the writer, so that a slow
    fsync (a busy disk, NFS) never delays a collector's next sample (the fast peak sampler
    relies on that), and the writer's files and csv writers stay on one thread.

    A failed write (disk full) stops the recording: `error` is set and `stop` is set, so whoever
    waits on `stop` wakes up. `emit` is public so a dashboard that already runs the collectors
    (`--tui --record`) can feed the same recorder with no collector threads of its own.
    With `tails`, the logs a discovery scan finds get tails in the same set (kept when their
    run vanishes: a recording reads what it can).
    """

    def __init__(
        self,
        writer: SessionWriter,
        collectors: Sequence[Collector[Any]] = (),
        *,
        pid_watch: PidSink | None = None,
        tails: TailSupervisor | None = None,
        peaks: Callable[[GpuTick], Mapping[str, int]] | None = None,
        handlers: Mapping[type, Handler] | None = None,
        stop: threading.Event | None = None,
        tap: Callable[[CollectorEvent], None] | None = None,
    ) -> None:
        self.writer = writer
        self.stop_event = stop if stop is not None else threading.Event()
        """Set to end the recording; the recorder sets it itself when writing fails."""
        self.running = RunningSet(
            collectors,
            pid_watch=pid_watch,
            tails=tails,
            keep_vanished=True,
            prefix="record:",
            stop=self.stop_event,
        )
        """The sources this recorder runs (none when a dashboard feeds `emit`)."""
        self.running.attach(self.emit)
        self.error: SessionWriteError | None = None
        """Why recording stopped early, if it did."""
        self.problems: list[str] = []
        """Bugs met while recording (a collector or handler raised); also in `events.jsonl`."""
        self._peaks, self._tap = peaks, tap
        self._sample_writers: dict[type, Callable[[Any], None]] = {
            GpuTick: self._write_tick,
            HostSample: writer.write_host,
            ContainerTick: writer.write_containers,
            **{kind: partial(handler, writer) for kind, handler in (handlers or {}).items()},
        }
        """How each sample type is written; a type not listed is noted once in the events."""
        self._event_writers: dict[type, Callable[[Any], None]] = {
            Sampled: self._write_sampled,
            Failed: self._write_failed,
            Recovered: self._write_recovered,
            Unavailable: self._write_unavailable,
            Finished: self._write_finished,
            Crashed: self._write_crashed,
        }
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._failing: dict[str, str] = {}
        self._unknown: set[type] = set()
        self._threads_lock = threading.Lock()
        self._started = False
        self._writer_thread = threading.Thread(
            target=self._write_loop, name="record:writer", daemon=True
        )

    @property
    def collectors(self) -> tuple[Collector[Any], ...]:
        """Every collector this recorder runs (or will run at `start`)."""
        return tuple(self.running.collectors)

    def start(self) -> None:
        """Start the writer thread and one thread per collector."""
        self._writer_thread.start()
        with self._threads_lock:
            self._started = True
            self.running.run()

    def add_collector(self, collector: Collector[Any]) -> bool:
        """Run one more collector (a log found while recording); safe from any thread.

        Returns False, and starts nothing, once the recording is stopping.
        """
        with self._threads_lock:
            if self.stop_event.is_set():
                return False
            if not self._started:
                self.running.collectors.append(collector)
                return True
            return self.running.start(collector) is not False

    def emit(self, event: CollectorEvent) -> None:
        """The sink of every collector loop: safe to call from any thread."""
        if self._tap is not None:
            self._tap(event)
        self._queue.put(event)

    def collectors_done(self) -> bool:
        """Whether every collector thread has ended (finite sources ran out, or all failed)."""
        return self.running.done()

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
        self.running.stop(timeout_s)
        self._queue.put(_STOP)
        if self._writer_thread.is_alive():
            self._writer_thread.join(writer_timeout_s)
        return not self._writer_thread.is_alive()

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

    def _event(
        self, kind: str, source: str, msg: str | None = None, title: str | None = None
    ) -> None:
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
        self.writer.write_event(
            {"kind": EVENT.recorder_bug, "source": source, "msg": text, "traceback": trace}
        )

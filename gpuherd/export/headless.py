"""`gpuherd serve-metrics`: the exporter as the only sink of this machine's (or a replay's) sources.

The live sources come from the composition root (`gpuherd.sources.LiveSources`, headless): the
GPUs, the host with its `PidWatch`, and with `--log`/`--watch` the discovery scan whose
`TailSupervisor` starts one tail per log found. Each source runs `run_collector` on a daemon
thread of its own and emits into the exporter; nothing is written anywhere.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from collectors.base import (
    Collector,
    CollectorEvent,
    Crashed,
    Failed,
    GpuherdError,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.discovery import DiscoveredLogs
from collectors.host import PidWatch
from collectors.loop import run_collector, wake_collectors
from collectors.samples import GpuTick
from collectors.writers import WriterCollector, WriterWatch
from gpuherd import exit_codes
from gpuherd.export.exporter import Exporter, from_args, live_queue, say
from gpuherd.monitor_logs import TaskHint, replay_hints
from gpuherd.options import ServeMetricsOptions
from gpuherd.sources import LiveSources, SourceOptions

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_WAIT_S = 5.0
CHECK_ALL_MAX_BYTES = 16 << 20
"""A session up to this size is read through once before serving, so a bad line deep in it is
said at the start (as the dashboard's replay does)."""


@dataclass
class Feed:
    """The sources to export: collectors, and what a sink must do for them."""

    host: str
    collectors: list[Collector[Any]]
    hints: list[TaskHint] = field(default_factory=list)
    sources: LiveSources | None = None
    """The live sources (their tail supervisor, their `PidWatch`); `None` for a replay."""
    writers: WriterWatch | None = None
    """What the writer collector looks for; the exporter's state tells it (live logs only)."""


def build_feed(args: ServeMetricsOptions) -> Feed:
    """The replayed session (`--replay DIR`) or this machine; raises `GpuherdError` when bad."""
    if args.replay is not None:
        from collectors.replay import SessionReplay

        directory = Path(args.replay)
        replay = SessionReplay(directory, speed=args.speed,
                               check_all=_csv_bytes(directory) <= CHECK_ALL_MAX_BYTES)
        host = str(replay.session.meta.get("host") or "unknown")
        return Feed(host, list(replay.collectors()), replay_hints(replay.session))
    sources = LiveSources(SourceOptions(interval_s=args.interval, logs=args.log,
                                        watch=args.watch, headless=True))
    collectors = sources.machine()
    writers = None
    if sources.has_logs:
        collectors.append(sources.discovery_collector())  # its first scan starts the tails
        writers = WriterWatch()  # which process writes each log: its task's pid and status
        collectors.append(WriterCollector(writers))
    return Feed(socket.gethostname(), collectors, sources=sources, writers=writers)


def _csv_bytes(directory: Path) -> int:
    try:
        return sum(f.stat().st_size for f in directory.glob("*.csv") if f.is_file())
    except OSError:
        return 0  # the reader names what it cannot read


class SourceThreads:
    """One daemon thread per collector, emitting into `emit`; stoppable one by one or all."""

    def __init__(self, emit: Callable[[CollectorEvent], None]) -> None:
        self._emit = emit
        self._running: list[tuple[Collector[Any], threading.Event, threading.Thread]] = []
        self._lock = threading.Lock()

    def start(self, collector: Collector[Any]) -> Any:
        """Run `collector` until stopped; the handle `stop` takes."""
        stop = threading.Event()
        thread = threading.Thread(target=self._run, args=(collector, stop),
                                  name=f"export:{collector.name}", daemon=True)
        handle = (collector, stop, thread)
        with self._lock:
            self._running.append(handle)
        thread.start()
        return handle

    def stop(self, handle: Any) -> None:
        """Stop one collector (a tail whose run vanished); does not wait for it."""
        collector, stop, _ = handle
        stop.set()
        wake_collectors([collector])

    def stop_all(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Stop every collector and wait a little for their threads."""
        with self._lock:
            running = list(self._running)
        for _, stop, _ in running:
            stop.set()
        wake_collectors(c for c, _, _ in running)
        for _, _, thread in running:
            thread.join(timeout_s / max(1, len(running)))

    def _run(self, collector: Collector[Any], stop: threading.Event) -> None:
        try:
            run_collector(collector, self._emit, stop)
        except Exception as error:  # a bug in one source: say it, the others go on
            self._emit(Crashed(collector.name, error))


def sink(exporter: Exporter, feed: Feed) -> Callable[[CollectorEvent], None]:
    """The emit of every source: the exporter, plus what the live sources need of a sink."""
    sources = feed.sources
    pid_watch: PidWatch | None = sources.pid_watch if sources is not None else None
    failing: set[str] = set()

    def emit(event: CollectorEvent) -> None:
        if isinstance(event, Sampled):
            sample = event.sample
            if isinstance(sample, GpuTick) and pid_watch is not None:
                pid_watch.set({p.pid for d in sample.devices for p in d.processes or ()})
            elif isinstance(sample, DiscoveredLogs) and sources is not None:
                sources.tails.discovered(sample)
        if isinstance(event, Failed) and event.source not in failing:
            failing.add(event.source)  # once per outage, not once per sample
            say(f"metrics: {event.source}: {event.error}")
        elif isinstance(event, Recovered):
            failing.discard(event.source)
        elif isinstance(event, (Unavailable, Crashed)):
            say(f"metrics: {event.source}: {event.error}")
        exporter.emit(event)

    return emit


def run(args: ServeMetricsOptions) -> int:
    """Export until SIGINT or SIGTERM; exit status 2 when it cannot start."""
    try:
        feed = build_feed(args)
        exporter = from_args(args, feed.host, feed.hints, listen=args.listen,
                             queue=live_queue() if feed.sources is not None else None,
                             watch=feed.writers)
    except GpuherdError as error:
        say(error.shown)
        return exit_codes.USAGE
    assert exporter is not None
    threads = SourceThreads(sink(exporter, feed))
    if feed.sources is not None:
        feed.sources.tails.attach(threads.start, threads.stop)
    stopped = threading.Event()
    previous = _on_signals(STOP_SIGNALS, lambda: stopped.set())
    try:
        exporter.start()
        say(f"serving metrics of {feed.host} on {exporter.url} until Ctrl-C")
        for collector in feed.collectors:
            threads.start(collector)
        while not stopped.wait(0.5):
            pass
    finally:
        _restore(previous)
        threads.stop_all()
        exporter.close()
        if feed.sources is not None:
            feed.sources.close()
    return exit_codes.OK


def _on_signals(signums: Sequence[int], then: Callable[[], None]) -> dict[int, Any]:
    def handle(signum: int, frame: FrameType | None) -> None:
        then()

    return {signum: signal.signal(signum, handle) for signum in signums}


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)

"""`gpuherd serve-metrics`: the exporter as the only sink of this machine's (or a replay's) sources.

The live sources come from the composition root (`gpuherd.sources.LiveSources`, headless) and
run as one `gpuherd.engine.running.RunningSet`, which wires them to each other (GPU pids to the
host and writer collectors, discovery to the tails); the exporter only consumes the events.
Nothing is written anywhere.
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
from collectors.machine.writers import WriterWatch
from collectors.samples import LogBatch
from gpuherd.common import exit_codes
from gpuherd.common.options import ServeMetricsOptions
from gpuherd.engine.running import RunningSet
from gpuherd.export.exporter import Exporter, from_args, live_queue, say
from gpuherd.sources import LiveSources, SourceOptions, live_sources
from gpuherd.tasks.hints import TaskHint, replay_hints

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
        from collectors.replay.replay import SessionReplay

        directory = Path(args.replay)
        replay = SessionReplay(
            directory, speed=args.speed, check_all=_csv_bytes(directory) <= CHECK_ALL_MAX_BYTES
        )
        host = str(replay.session.meta.get("host") or "unknown")
        return Feed(host, list(replay.collectors()), replay_hints(replay.session))
    sources = live_sources(
        SourceOptions(interval_s=args.interval, logs=args.log, watch=args.watch, headless=True)
    )
    return Feed(
        socket.gethostname(), sources.collectors(), sources=sources, writers=sources.writers
    )


def _csv_bytes(directory: Path) -> int:
    try:
        return sum(f.stat().st_size for f in directory.glob("*.csv") if f.is_file())
    except OSError:
        return 0  # the reader names what it cannot read


def sink(exporter: Exporter) -> Callable[[CollectorEvent], None]:
    """The exporter's sink: says each outage once on stderr, hands every event on."""
    failing: set[str] = set()

    def emit(event: CollectorEvent) -> None:
        if isinstance(event, Failed) and event.source not in failing:
            failing.add(event.source)  # once per outage, not once per sample
            say(f"metrics: {event.source}: {event.error}")
        elif isinstance(event, Recovered):
            failing.discard(event.source)
        elif isinstance(event, (Unavailable, Crashed)):
            say(f"metrics: {event.source}: {event.error}")
        elif (
            isinstance(event, Sampled)
            and isinstance(event.sample, LogBatch)
            and event.sample.notice
        ):
            say(f"metrics: {event.source}: {event.sample.notice}")  # a tail polls, and why
        exporter.emit(event)

    return emit


def running_set(feed: Feed) -> RunningSet:
    """The feed's sources as one running set (live sources wired to each other)."""
    sources = feed.sources
    if sources is None:
        return RunningSet(feed.collectors, prefix="export:")
    return RunningSet(
        feed.collectors,
        pid_watch=sources.pid_watch,
        tails=sources.tails if sources.has_logs else None,
        writers=feed.writers,
        prefix="export:",
    )


def run(args: ServeMetricsOptions) -> int:
    """Export until SIGINT or SIGTERM; exit status 2 when it cannot start."""
    try:
        feed = build_feed(args)
        exporter = from_args(
            args,
            feed.host,
            feed.hints,
            listen=args.listen,
            queue=live_queue() if feed.sources is not None else None,
        )
    except GpuherdError as error:
        say(error.shown)
        return exit_codes.USAGE
    assert exporter is not None
    running = running_set(feed)
    running.attach(sink(exporter))
    stopped = threading.Event()
    previous = _on_signals(STOP_SIGNALS, lambda: stopped.set())
    try:
        exporter.start()
        say(f"serving metrics of {feed.host} on {exporter.url} until Ctrl-C")
        running.run()
        while not stopped.wait(0.5):
            pass
    finally:
        _restore(previous)
        running.stop(STOP_WAIT_S)
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

"""The exporter as a sink: give it the sources' events (`emit`), it serves them as metrics.

Every command that takes `--serve-metrics` builds one with `from_args` before anything else
runs, so a bad address, a port in use or a certificate that does not match its key is one line
on stderr and exit status 2 (usage) with nothing started; then it feeds `emit` from wherever
its collectors' events already go (the dashboard's tap, the recorder, the headless runner).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.registry import CollectorRegistry

from collectors.base import CollectorEvent
from collectors.samples import GpuTick
from collectors.session.session_format import COMMAND_LOG_FILE
from gpuherd.common.options import MetricsFlags, RecordOptions
from gpuherd.export.address import ListenAddress, parse_listen
from gpuherd.export.queue_metrics import QueueProvider
from gpuherd.export.scrape import ScrapeCollector
from gpuherd.export.server import ExporterError, MetricsServer, tls_context
from gpuherd.export.state import ExportState
from gpuherd.present.format import visible
from gpuherd.tasks.hints import COMMAND_TASK, TaskHint


def say(line: str) -> None:
    """One line on stderr (a closed terminal is not worth dying for)."""
    try:
        print(visible(f"gpuherd: {line}"), file=sys.stderr, flush=True)
    except OSError:
        pass


class Exporter:
    """State, scrape collector and HTTP(S) server of one `--serve-metrics`.

    Args:
        listen: Where to listen.
        host: The `host` label of every series (this machine's name, or a replay's host).
        hints: What is known of tasks from outside their logs (a recorded command's name).
        cert: PEM certificate for HTTPS (with `key`).
        key: PEM private key of `cert`.
        queue: The job queue's state provider; `None` until a queue runs beside it.
        report: Where problems met while serving are said (default: stderr).

    Raises:
        ExporterError: the address cannot be bound or the certificate and key do not fit.
    """

    def __init__(
        self,
        listen: ListenAddress,
        host: str,
        *,
        hints: Sequence[TaskHint] = (),
        cert: str | None = None,
        key: str | None = None,
        queue: QueueProvider | None = None,
        report: Callable[[str], None] = say,
    ) -> None:
        tls = tls_context(cert, key) if cert is not None and key is not None else None
        self.state = ExportState(host, hints)
        self.collector = ScrapeCollector(self.state, queue, report)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.server = MetricsServer(listen, self.registry, tls, report)
        self.url = ListenAddress(listen.host, self.server.port).url(tls is not None)
        self.queue = queue
        use_gpu_totals = getattr(queue, "use_gpu_totals", None)
        if callable(use_gpu_totals):  # the queue's reservations are judged as a runner does
            use_gpu_totals(self.gpu_totals)

    def gpu_totals(self) -> dict[str, int]:
        """Total memory per GPU UUID, from the newest reading of each GPU source."""
        return {
            gpu.uuid: gpu.memory_total_bytes
            for gpu in self.state.snapshot().gpus
            if gpu.memory_total_bytes is not None
        }

    def emit(self, event: CollectorEvent) -> None:
        """A collector event (thread-safe): the sink every source set feeds."""
        self.state.emit(event)

    def add_peaks(self, tick: GpuTick, peaks: Any) -> None:
        """A recording's fast-sampler peaks for one row (its writer thread calls this)."""
        self.state.add_peaks(tick, peaks)

    def start(self) -> None:
        """Serve on a thread of its own."""
        self.server.start()

    def close(self) -> None:
        """Stop serving (and close what the queue provider holds open)."""
        self.server.stop()
        close = getattr(self.queue, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def beside(
    args: MetricsFlags,
    host: str,
    hints: Sequence[TaskHint],
    taps: list[Callable[[CollectorEvent], None]],
    notices: list[str] | None = None,
    live: bool = True,
) -> Iterator[Exporter | None]:
    """Serve `--serve-metrics` (if given) while the body runs, fed by one more tap.

    The dashboard, a replay and a recording call this before they start anything: an
    `ExporterError` raised here is their usage error (exit status 2). `live`: this machine's
    sources (not a replay), so this machine's job queue is exported too.
    """
    exporter = from_args(args, host, hints, queue=live_queue() if live else None)
    if exporter is None:
        yield None
        return
    taps.append(exporter.emit)
    exporter.start()
    if notices is not None:
        notices.append(f"serving metrics on {exporter.url}")
    try:
        yield exporter
    finally:
        exporter.close()


def for_recording(args: RecordOptions, options: Any) -> Exporter | None:
    """`record --serve-metrics`: an exporter fed by the recording (`RecordingOptions.tap`).

    It also gets each row's fast-sampler peaks (`on_peaks`), and names the recorded command's
    task `command` as the dashboard does. Not serving yet: call `start`.
    """
    hints = [TaskHint(str(Path(args.record) / COMMAND_LOG_FILE), label=COMMAND_TASK)]
    exporter = from_args(args, socket.gethostname(), hints, queue=live_queue())
    if exporter is not None:
        options.tap, options.on_peaks = exporter.emit, exporter.add_peaks
    return exporter


def live_queue() -> QueueProvider:
    """This machine's job queue, read at each scrape (`gpuherd.export.queue_source`)."""
    from gpuherd.export.queue_source import QueueReader  # sqlite3 only for live exporters

    return QueueReader(warn=lambda text: say(f"metrics: queue: {text}"))


def from_args(
    args: MetricsFlags,
    host: str,
    hints: Sequence[TaskHint] = (),
    listen: str | None = None,
    queue: QueueProvider | None = None,
) -> Exporter | None:
    """The exporter `--serve-metrics` asks for (bound, not yet serving), or `None` without it.

    Raises:
        ExporterError: as `Exporter` does.
    """
    text = listen if listen is not None else getattr(args, "serve_metrics", None)
    if text is None:
        return None
    try:
        address = parse_listen(text)
    except ValueError as error:
        raise ExporterError(str(error)) from None
    return Exporter(
        address,
        host,
        hints=hints,
        cert=getattr(args, "metrics_cert", None),
        key=getattr(args, "metrics_key", None),
        queue=queue,
    )

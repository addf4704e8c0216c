"""One scrape: the state's snapshot turned into metric families, each part on its own.

A part that raises (a bug, a queue provider that fails) is left out of that scrape, counted in
`gpuherd_exporter_scrape_errors_total{part}` and said once on stderr; the other parts and the
next scrape are unaffected, so the exporter never dies of one bad scrape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from functools import partial

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuherd import __version__
from gpuherd.export.families import gpu_families, process_families, task_families
from gpuherd.export.queue_metrics import QueueProvider, queue_families
from gpuherd.export.slurm_families import slurm_families
from gpuherd.export.state import ExportSnapshot, ExportState

Part = Callable[[ExportSnapshot], Iterable[Metric]]
PARTS: tuple[tuple[str, Part], ...] = (
    ("gpu", gpu_families),
    ("process", process_families),
    ("task", task_families),
    ("slurm", slurm_families),
)


class ScrapeCollector:
    """The `prometheus_client` collector the exporter's registry holds.

    Args:
        state: Where the sources' samples are kept.
        queue: The queue's state provider, once a queue runs beside the exporter.
        report: Told (once per distinct message) what a failing part raised.
    """

    def __init__(
        self,
        state: ExportState,
        queue: QueueProvider | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.queue = queue
        self._report = report
        self._errors: dict[str, int] = {}
        self._said: set[str] = set()
        self._lock = threading.Lock()  # two scrapes at once (two Prometheus servers)

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on what the sources said."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Every family of one scrape, then the exporter's own series."""
        host = self.state.host
        try:
            snap = self.state.snapshot()
        except Exception as error:  # a bug in the state: serve the exporter's own series
            self._failed("snapshot", error)
            snap = None
        parts: list[tuple[str, Callable[[], Iterable[Metric]]]] = []
        if snap is not None:
            parts += [(name, partial(build, snap)) for name, build in PARTS]
        if self.queue is not None:
            index_of = {d.uuid: str(d.index) for d in snap.gpus} if snap is not None else {}
            parts.append(("queue", partial(queue_families, host, self.queue, index_of)))
        for name, build in parts:
            try:
                families = list(build())  # whole, or not at all
            except Exception as error:
                self._failed(name, error)
                continue
            yield from families
        yield from self._own(host, snap)

    def _own(self, host: str, snap: ExportSnapshot | None) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "gpuherd_exporter_info",
            "The exporter's host label and version (value 1).",
            labels=("host", "version"),
        )
        info.add_metric([host, __version__], 1.0)
        errors = CounterMetricFamily(
            "gpuherd_exporter_scrape_errors",
            "Scrapes that left a part out because it raised.",
            labels=("host", "part"),
        )
        with self._lock:
            counts = sorted(self._errors.items())
        for part, count in counts:
            errors.add_metric([host, part], count)
        failing = GaugeMetricFamily(
            "gpuherd_sources_failing",
            "Sources (GPU, host, logs) failing right now.",
            labels=("host",),
        )
        failing.add_metric([host], len(snap.failing) if snap is not None else 0)
        yield from (info, errors, failing)

    def _failed(self, part: str, error: Exception) -> None:
        line = f"metrics: the {part} part of a scrape failed: {type(error).__name__}: {error}"
        with self._lock:
            self._errors[part] = self._errors.get(part, 0) + 1
            new = line not in self._said and len(self._said) < 64  # bounded, like the labels
            if new:
                self._said.add(line)
        if new and self._report is not None:
            self._report(line)

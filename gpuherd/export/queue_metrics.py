"""The queue's metrics: a hook the exporter calls when a queue-state provider is given.

The job queue plugs in here without the exporter knowing how it stores jobs: it passes a
`QueueProvider` (a function returning a `QueueState`) to `Exporter`, and each scrape then shows
jobs by state and memory reserved per GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric

MAX_QUEUE_STATES = 16
MAX_QUEUE_GPUS = 64


@dataclass(frozen=True, slots=True)
class QueueState:
    """What the queue says at one scrape."""

    jobs_by_state: Mapping[str, int] = field(default_factory=dict)
    """Job count per state (`queued`, `running`, `done`, ...): a small fixed set."""
    reserved_bytes_by_gpu: Mapping[str, int] = field(default_factory=dict)
    """GPU memory the queue has promised to jobs, by GPU index (as text)."""


QueueProvider = Callable[[], QueueState]
"""Called once per scrape, on the scrape's thread; may raise (the scrape goes on without it)."""


def queue_families(host: str, provider: QueueProvider) -> Iterator[Metric]:
    """`gpuherd_queue_jobs{state}` and `gpuherd_queue_reserved_bytes{gpu}`."""
    state = provider()
    jobs = GaugeMetricFamily("gpuherd_queue_jobs", "Jobs in the queue, by state.",
                             labels=("host", "state"))
    for name, count in sorted(state.jobs_by_state.items())[:MAX_QUEUE_STATES]:
        jobs.add_metric([host, str(name)[:32]], count)
    reserved = GaugeMetricFamily("gpuherd_queue_reserved_bytes",
                                 "GPU memory the queue reserves for its jobs (bytes).",
                                 labels=("host", "gpu"))
    for gpu, value in sorted(state.reserved_bytes_by_gpu.items())[:MAX_QUEUE_GPUS]:
        reserved.add_metric([host, str(gpu)[:64]], value)
    yield from (jobs, reserved)

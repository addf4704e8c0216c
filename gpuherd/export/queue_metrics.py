"""The queue's metrics: a hook the exporter calls when a queue-state provider is given.

The exporter calls a `QueueProvider` (a function returning a `QueueState`) once per scrape when
it has one: `gpuherd.export.queue_source.QueueReader` reads the job queue of this machine for
the live exporters; a queue runner may pass its own.
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
    reserved_bytes_by_uuid: Mapping[str, int] = field(default_factory=dict)
    """GPU memory promised to launched jobs (the host's shared ledger), by GPU UUID."""


QueueProvider = Callable[[], QueueState]
"""Called once per scrape, on the scrape's thread; may raise (the scrape goes on without it)."""


def queue_families(
    host: str, provider: QueueProvider, index_of: Mapping[str, str] | None = None
) -> Iterator[Metric]:
    """`gpuherd_queue_jobs{state}` and `gpuherd_queue_reserved_bytes{gpu, uuid}`.

    `index_of` maps a GPU UUID to its index (from the newest tick); a GPU it does not know gets
    an empty `gpu` label.
    """
    state = provider()
    index_of = index_of or {}
    jobs = GaugeMetricFamily(
        "gpuherd_queue_jobs", "Jobs in the queue, by state.", labels=("host", "state")
    )
    for name, count in sorted(state.jobs_by_state.items())[:MAX_QUEUE_STATES]:
        jobs.add_metric([host, str(name)[:32]], count)
    reserved = GaugeMetricFamily(
        "gpuherd_queue_reserved_bytes",
        "GPU memory the queue reserves for its jobs (bytes).",
        labels=("host", "gpu", "uuid"),
    )
    for uuid, value in sorted(state.reserved_bytes_by_uuid.items())[:MAX_QUEUE_GPUS]:
        reserved.add_metric([host, index_of.get(uuid, ""), str(uuid)[:64]], value)
    yield from (jobs, reserved)

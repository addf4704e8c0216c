"""What a source's samples are for: the role table that sinks route by, never the source's name."""

from __future__ import annotations

from typing import Any, Final

from collectors.machine.writers import WritersTick
from collectors.samples import (
    ContainerTick,
    DiscoveredLogs,
    GpuTick,
    HostSample,
    LogBatch,
    QueueSnapshot,
)
from collectors.slurm.samples import SlurmTick

GPU: Final = "gpu"
"""Ticks of GPUs (`GpuTick`): the GPU panel, the chart, the process table."""
HOST: Final = "host"
"""Host-wide figures and process details (`HostSample`)."""
LOG: Final = "log"
"""Training-log batches (`LogBatch`), one task per followed log: the tasks panel."""
DISCOVERY: Final = "discovery"
"""Scans that list the logs to follow (`DiscoveredLogs`)."""
CONTAINERS: Final = "containers"
"""Running containers and their stats (`ContainerTick`): the containers panel."""
QUEUE: Final = "queue"
"""Looks at this user's job queue (`QueueSnapshot`): the queue panel."""
WRITERS: Final = "writers"
"""Which processes write the followed logs (`WritersTick`): the tasks' pids, GPUs and status."""
SLURM: Final = "slurm"
"""The Slurm jobs on this node and the job of each GPU process (`SlurmTick`)."""

ROLE_OF_SAMPLE: dict[type, str] = {
    GpuTick: GPU,
    HostSample: HOST,
    LogBatch: LOG,
    DiscoveredLogs: DISCOVERY,
    ContainerTick: CONTAINERS,
    QueueSnapshot: QUEUE,
    WritersTick: WRITERS,
    SlurmTick: SLURM,
}
"""The role of a sample type; a new kind of sample adds its line here."""

LATEST_ONLY: frozenset[str] = frozenset({GPU, HOST, CONTAINERS, QUEUE, WRITERS, SLURM})
"""Roles whose every sample is a whole snapshot, so a newer one may replace an older one that a
lagging sink has not handled yet (a queue look lists every job). Log batches and scans carry
news the next one does not repeat."""


def role_of(collector: object) -> str | None:
    """The role a collector declares in its `role` attribute (`None`: it declares none)."""
    role = getattr(collector, "role", None)
    return role if isinstance(role, str) else None


def sample_role(sample: Any) -> str | None:
    """The role of a sample's type, `None` for a type the table does not list."""
    return ROLE_OF_SAMPLE.get(type(sample))

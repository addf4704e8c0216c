"""Container rows for the containers panel: the engine's stats joined with GPU use, and sorting."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.machine.container_gpu import gpu_use_by_container
from collectors.samples import ContainerTick, GpuTick, HostSample
from gpuherd.present.format import visible


@dataclass(frozen=True, slots=True)
class ContainerRow:
    """One running container as the panel shows it."""

    key: str
    """Stable table row key: the full container id."""
    short_id: str
    name: str
    image: str
    status: str
    uptime_s: float | None
    cpu_pct: float | None
    memory_used_bytes: int | None
    memory_limit_bytes: int | None
    net_rx_bytes_per_s: float | None
    net_tx_bytes_per_s: float | None
    block_read_bytes_per_s: float | None
    block_write_bytes_per_s: float | None
    pids: int | None
    gpus: str
    """The GPUs the container was given (`0,1`, `all`), empty when none."""
    gpu_memory_bytes: int | None
    """The sum over its GPU processes; `None` when it has none (or the driver hides it)."""
    gpu_pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ContainerSort:
    """One entry of the panel's `s` cycle; `r` flips its direction."""

    name: str
    label: str
    value: Callable[[ContainerRow], Any]
    descending: bool


def _num(value: float | None) -> float:
    return float("-inf") if value is None else float(value)


CONTAINER_SORTS: tuple[ContainerSort, ...] = (
    ContainerSort("gpu_memory", "GPU memory", lambda r: _num(r.gpu_memory_bytes), True),
    ContainerSort("cpu", "CPU %", lambda r: _num(r.cpu_pct), True),
    ContainerSort("memory", "memory", lambda r: _num(r.memory_used_bytes), True),
    ContainerSort("uptime", "uptime", lambda r: _num(r.uptime_s), True),
    ContainerSort("name", "name", lambda r: r.name, False),
)


def next_container_sort(current: ContainerSort) -> ContainerSort:
    """The key after `current` in the cycle, in its own default direction."""
    names = [key.name for key in CONTAINER_SORTS]
    return CONTAINER_SORTS[(names.index(current.name) + 1) % len(CONTAINER_SORTS)]


def sort_containers(
    rows: Iterable[ContainerRow], key: ContainerSort, reverse: bool = False
) -> list[ContainerRow]:
    """Rows in display order; ties keep name order so the table does not jitter.

    Unknown values sort last in the default direction; `reverse` flips the whole order.
    """
    stable = sorted(rows, key=lambda r: (r.name, r.key))
    descending = key.descending != reverse
    return sorted(stable, key=key.value, reverse=descending)


def build_container_rows(
    containers: ContainerTick | None,
    gpus: GpuTick | None,
    host: HostSample | None,
    now: float | None,
) -> list[ContainerRow]:
    """One row per container of `containers`, with the GPU memory of its processes.

    Uptime counts to `now` (the wall clock live, the recorded time in a replay), or to the
    engine's listing time when `now` is unknown.
    """
    if containers is None:
        return []
    use = gpu_use_by_container(gpus, host.processes if host else ())
    at = containers.taken_at if now is None else now
    rows = []
    for c in containers.containers:
        gpu = use.get(c.short_id)
        rows.append(
            ContainerRow(
                # Names, images and states are the engine's (any user may name a container): the
                # row holds them as shown, so sorting and filtering match what is on screen.
                key=c.id,
                short_id=c.short_id,
                name=visible(c.name),
                image=visible(c.image),
                status=visible(c.status),
                uptime_s=None if c.started_at is None else max(0.0, at - c.started_at),
                cpu_pct=c.cpu_pct,
                memory_used_bytes=c.memory_used_bytes,
                memory_limit_bytes=c.memory_limit_bytes,
                net_rx_bytes_per_s=c.net_rx_bytes_per_s,
                net_tx_bytes_per_s=c.net_tx_bytes_per_s,
                block_read_bytes_per_s=c.block_read_bytes_per_s,
                block_write_bytes_per_s=c.block_write_bytes_per_s,
                pids=c.pids,
                gpus=visible(",".join(c.gpu_devices)),
                gpu_memory_bytes=gpu.memory_bytes if gpu else None,
                gpu_pids=gpu.pids if gpu else (),
            )
        )
    return rows


def first_tick(samples: Sequence[object]) -> ContainerTick | None:
    """The first container tick among a role's samples."""
    return next((s for s in samples if isinstance(s, ContainerTick)), None)

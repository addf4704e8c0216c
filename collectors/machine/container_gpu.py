"""Which container owns each GPU process: the join of a GPU tick, host details and containers.

The driver lists GPU processes by host pid (`GpuTick`); the host collector reads each one's
container id from its cgroup (`ProcessInfo.container`, 12 characters); the container engine
names the containers (`ContainerTick`). Pure functions, shared by the dashboard's panels,
`gpuherd snapshot` and the recorder, so all of them add up a container's GPU memory alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collectors.samples import ContainerTick, GpuTick, ProcessInfo


@dataclass(frozen=True, slots=True)
class ContainerGpuUse:
    """What one container's processes hold on the GPUs in one GPU tick."""

    memory_bytes: int | None
    """GPU memory of its processes, summed over every GPU; `None` when the driver gave the
    memory of none of them."""
    pids: tuple[int, ...]
    """Its GPU processes (host pids), ascending."""
    gpus: tuple[int, ...]
    """Indices of the GPUs they are on, ascending."""


def container_of_pid(processes: Iterable[ProcessInfo]) -> dict[int, str]:
    """Host pid -> short container id, for the processes that run in a container."""
    return {p.pid: p.container for p in processes if p.container}


def gpu_use_by_container(
    tick: GpuTick | None, processes: Iterable[ProcessInfo]
) -> dict[str, ContainerGpuUse]:
    """GPU use per short container id: the sum over the container's GPU processes.

    `processes` are the host collector's details (`HostSample.processes`); a GPU process the
    host could not see, or that runs outside any container, counts for no container. A process
    on two GPUs counts on both, as its memory is on both.
    """
    if tick is None:
        return {}
    owner = container_of_pid(processes)
    memory: dict[str, list[int | None]] = {}
    pids: dict[str, set[int]] = {}
    gpus: dict[str, set[int]] = {}
    for device in tick.devices:
        for proc in device.processes or ():
            cid = owner.get(proc.pid)
            if cid is None:
                continue
            memory.setdefault(cid, []).append(proc.used_memory_bytes)
            pids.setdefault(cid, set()).add(proc.pid)
            gpus.setdefault(cid, set()).add(device.index)
    out = {}
    for cid, used in memory.items():
        known = [u for u in used if u is not None]
        out[cid] = ContainerGpuUse(
            sum(known) if known else None, tuple(sorted(pids[cid])), tuple(sorted(gpus[cid]))
        )
    return out


def container_names(tick: ContainerTick | None) -> dict[str, str]:
    """Short container id -> container name, for the containers of `tick`."""
    return {} if tick is None else {c.short_id: c.name for c in tick.containers}


def container_label(container: str | None, names: Mapping[str, str]) -> str | None:
    """How to show a process's container: its name when the engine listed it, else its id."""
    if not container:
        return None
    return names.get(container[:12], container)

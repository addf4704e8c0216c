"""Process rows for the table: joining GPU and host samples, sorting, filtering, memory gaps."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collectors.machine.container_gpu import container_label
from collectors.samples import GpuSample, GpuTick, HostSample, ProcessInfo


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One process on one GPU, with whatever the host could tell about it."""

    key: str
    """Stable table row key: `<gpu uuid>/<pid>`."""
    gpu_index: int
    uuid: str
    pid: int
    gpu_memory_bytes: int | None
    user: str | None = None
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    elapsed_s: float | None = None
    command: str | None = None
    container: str | None = None
    """The container's name when the engine listed it, else its short id."""
    container_id: str | None = None
    """The short container id from the process's cgroup."""
    task: str | None = None
    """The label of the task whose log this process (or its parent) writes."""
    job: str | None = None
    """The Slurm job and step the process belongs to (`job 4711.0`)."""


@dataclass(frozen=True)
class SortKey:
    """One entry of the `s` cycle."""

    name: str
    label: str
    value: Callable[[ProcessRow], Any]
    descending: bool


def _num(value: float | None) -> float:
    # Unknown values sort after every known one, whichever the direction.
    return float("-inf") if value is None else float(value)


SORT_KEYS: tuple[SortKey, ...] = (
    SortKey("gpu_memory", "GPU memory", lambda r: _num(r.gpu_memory_bytes), True),
    SortKey("cpu", "CPU %", lambda r: _num(r.cpu_pct), True),
    SortKey("rss", "RSS", lambda r: _num(r.rss_bytes), True),
    SortKey("elapsed", "elapsed", lambda r: _num(r.elapsed_s), True),
    SortKey("pid", "pid", lambda r: r.pid, False),
    SortKey("user", "user", lambda r: (r.user is None, r.user or ""), False),
    SortKey("gpu", "GPU", lambda r: (r.gpu_index, -_num(r.gpu_memory_bytes)), False),
)


def next_sort_key(current: SortKey) -> SortKey:
    """The key after `current` in the cycle."""
    names = [key.name for key in SORT_KEYS]
    return SORT_KEYS[(names.index(current.name) + 1) % len(SORT_KEYS)]


def build_rows(
    tick: GpuTick | None,
    host: HostSample | None,
    names: Mapping[str, str] | None = None,
    tasks: Mapping[int, str] | None = None,
    jobs: Mapping[int, str] | None = None,
) -> list[ProcessRow]:
    """One row per (GPU, pid) in `tick`, with host details where the host sample has them.

    Elapsed time is measured against the tick's own time, so a replay shows the recorded age;
    `names` (short container id -> name) names the containers the engine lists; `tasks`
    (pid -> task label) names the task each process runs; `jobs` (pid -> `job 4711.0`) its
    Slurm job.
    """
    if tick is None:
        return []
    details = {info.pid: info for info in (host.processes if host else ())}
    rows = []
    for gpu in tick.devices:
        for proc in gpu.processes or ():
            info = details.get(proc.pid)
            row = _row(gpu, proc.pid, proc.used_memory_bytes, info, tick.taken_at, names or {})
            task, job = (tasks or {}).get(proc.pid), (jobs or {}).get(proc.pid)
            rows.append(row if task is None and job is None else replace(row, task=task, job=job))
    return rows


def _row(
    gpu: GpuSample,
    pid: int,
    used: int | None,
    info: ProcessInfo | None,
    now: float,
    names: Mapping[str, str],
) -> ProcessRow:
    base = ProcessRow(f"{gpu.uuid}/{pid}", gpu.index, gpu.uuid, pid, used)
    if info is None:
        return base
    elapsed = None if info.started_at is None else max(0.0, now - info.started_at)
    return ProcessRow(
        base.key,
        gpu.index,
        gpu.uuid,
        pid,
        used,
        info.user,
        info.cpu_pct,
        info.rss_bytes,
        elapsed,
        info.command,
        container_label(info.container, names),
        info.container,
    )


def sort_rows(rows: Iterable[ProcessRow], key: SortKey) -> list[ProcessRow]:
    """Rows in display order; ties keep GPU then pid order so the table does not jitter."""
    stable = sorted(rows, key=lambda r: (r.gpu_index, r.pid))
    if key.descending:
        return sorted(stable, key=key.value, reverse=True)
    return sorted(stable, key=key.value)


def filter_rows(rows: Iterable[ProcessRow], text: str) -> list[ProcessRow]:
    """Rows whose user, command, container or pid contains `text` (case-insensitive)."""
    needle = text.strip().lower()
    if not needle:
        return list(rows)
    return [row for row in rows if needle in _haystack(row)]


def in_container(rows: Iterable[ProcessRow], short_id: str | None) -> list[ProcessRow]:
    """Rows of processes in the container `short_id` (every row when `None`)."""
    if short_id is None:
        return list(rows)
    return [row for row in rows if (row.container_id or "")[:12] == short_id]


def _haystack(row: ProcessRow) -> str:
    return " ".join(
        (
            str(row.pid),
            row.user or "",
            row.command or "",
            row.container or "",
            row.task or "",
            row.job or "",
        )
    ).lower()


@dataclass(frozen=True, slots=True)
class MemoryGap:
    """GPU memory in use that no visible process accounts for."""

    gpu_index: int
    unattributed_bytes: int
    listed: bool
    """False when the driver would not list the GPU's processes at all."""


def memory_gaps(devices: Sequence[GpuSample], min_bytes: int = 1 << 20) -> list[MemoryGap]:
    """GPUs with at least `min_bytes` used but not attributed to a listed process."""
    gaps = []
    for gpu in devices:
        gap = gpu.unattributed_memory_bytes
        if gpu.error is None and gap is not None and gap >= min_bytes:
            gaps.append(MemoryGap(gpu.index, gap, gpu.processes is not None))
    return gaps

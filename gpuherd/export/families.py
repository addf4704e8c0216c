"""Metric families from one `ExportSnapshot`: names, help texts and bounded labels.

Labels never carry a command line, an environment, a path or a file's contents. Their values
come from small sets (GPU index and UUID, user, container, a finding kind from
`FINDING_KINDS`, a task status) or are capped: at most `MAX_PROCESSES` process series (the
largest users of memory) and `MAX_TASKS` tasks, each named by its short label; what is left
out is counted in `gpuherd_processes_unexported` and `gpuherd_tasks_unexported`. Every label
value is cut to `MAX_LABEL_CHARS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from collectors.samples import GpuSample
from gpuherd.export.slurm_families import (
    MAX_SLURM_JOBS,
    gpu_job,
    job_label_names,
    process_job,
)
from gpuherd.export.state import ExportSnapshot
from gpuherd.tasks import TaskView
from parsers.vocabulary import LOSS_NAMES, VALIDATION_NAMES

MAX_PROCESSES = 64
"""Process series per scrape; a host with more GPU processes exports the largest 64."""
MAX_TASKS = 32
"""Task series sets per scrape; running tasks first, then the most recently active."""
MAX_LABEL_CHARS = 64
FINDING_KINDS = (
    "nan",
    "inf",
    "oom",
    "traceback",
    "nccl",
    "cuda_error",
    "killed",
    "download",
    "stalled",
    "chance",
    "zero_metric",
    "overfitting",
    "gpu_low",
    "gpu_swing",
    "other",
)
"""Every health-finding kind gets one series per task (0 when absent); a kind not listed here
(a rule added later) counts under `other` until it is."""
STATUSES = (
    "running",
    "stalled",
    "waiting",
    "idle",
    "finished",
    "done",
    "stopped",
    "failed",
    "error",
)
"""`TaskView.status` values; one series each per task, 1 for the current one."""
THROUGHPUT_UNITS = {
    "throughput/samples_s": "samples_s",
    "throughput/tokens_s": "tokens_s",
    "throughput/it_s": "it_s",
    "steps_s": "steps_s",
}
GPU_LABELS = ("host", "gpu", "uuid")
TASK_LABELS = ("host", "task")

GPU_GAUGES: tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...] = (
    ("gpuherd_gpu_memory_used_bytes", "GPU memory in use (bytes).", lambda d: d.memory_used_bytes),
    (
        "gpuherd_gpu_memory_total_bytes",
        "GPU memory in all (bytes).",
        lambda d: d.memory_total_bytes,
    ),
    (
        "gpuherd_gpu_memory_reserved_bytes",
        "GPU memory the driver reserves for itself (bytes).",
        lambda d: d.memory_reserved_bytes,
    ),
    (
        "gpuherd_gpu_utilization_ratio",
        "GPU utilization over the driver's last period (0 to 1).",
        lambda d: None if d.gpu_util_pct is None else d.gpu_util_pct / 100.0,
    ),
    (
        "gpuherd_gpu_temperature_celsius",
        "GPU temperature (degrees Celsius).",
        lambda d: d.temperature_c,
    ),
    ("gpuherd_gpu_power_watts", "GPU power draw (watts).", lambda d: d.power_w),
)
"""Name, help and value of each per-GPU gauge; a `None` value (not reported) is left out."""


OWN_SERIES_MAX = 7
"""The exporter's own series: its info, scrape errors of five parts, failing sources."""


def max_series(gpus: int) -> int:
    """The most series one scrape shows on a host with `gpus` GPUs (the queue's aside)."""
    per_gpu = len(GPU_GAUGES) + 3  # info, ok, peak
    per_task = 5 + len(STATUSES) + len(FINDING_KINDS) + gpus
    return (
        gpus * per_gpu
        + MAX_PROCESSES
        + 1
        + MAX_TASKS * per_task
        + 1
        + OWN_SERIES_MAX
        + 3 * MAX_SLURM_JOBS
    )


def cut(value: str | None) -> str:
    """A label value: empty when unknown, at most `MAX_LABEL_CHARS` characters."""
    return (value or "")[:MAX_LABEL_CHARS]


def gpu_families(snap: ExportSnapshot) -> Iterator[Metric]:
    """Per-GPU gauges, the info series and the recent peak."""
    for name, text, value_of in GPU_GAUGES:
        family = GaugeMetricFamily(name, text, labels=_gpu_label_names(snap))
        for device in snap.gpus:
            value = value_of(device)
            if value is not None:
                family.add_metric(_gpu_labels(snap, device), value)
        yield family
    info = GaugeMetricFamily(
        "gpuherd_gpu_info",
        "One series per GPU: its model (value 1).",
        labels=(*_gpu_label_names(snap), "model"),
    )
    ok = GaugeMetricFamily(
        "gpuherd_gpu_ok",
        "1 when the GPU was read this round, 0 when it failed (for example lost from the bus).",
        labels=_gpu_label_names(snap),
    )
    peak = GaugeMetricFamily(
        "gpuherd_gpu_memory_peak_bytes",
        "Highest GPU memory the fast sampler read over the last 15 s (only while recording).",
        labels=_gpu_label_names(snap),
    )
    for device in snap.gpus:
        labels = _gpu_labels(snap, device)
        info.add_metric([*labels, cut(device.name)], 1.0)
        ok.add_metric(labels, 0.0 if device.error else 1.0)
        if device.uuid in snap.peaks:
            peak.add_metric(labels, snap.peaks[device.uuid])
    yield from (info, ok, peak)


def _gpu_labels(snap: ExportSnapshot, device: GpuSample) -> list[str]:
    return [snap.host, str(device.index), cut(device.uuid), *gpu_job(snap, device)]


def _gpu_label_names(snap: ExportSnapshot) -> tuple[str, ...]:
    """GPU_LABELS, and `slurm_job` on a Slurm node."""
    return (*GPU_LABELS, *job_label_names(snap))


def process_families(snap: ExportSnapshot) -> Iterator[Metric]:
    """GPU memory per process, labelled with user, container and Slurm job; largest first."""
    rows: list[tuple[int, list[str]]] = []
    for device in snap.gpus:
        for process in device.processes or ():
            if process.used_memory_bytes is None:
                continue
            info = snap.processes.get(process.pid)
            rows.append(
                (
                    process.used_memory_bytes,
                    [
                        snap.host,
                        str(device.index),
                        cut(device.uuid),
                        str(process.pid),
                        cut(info.user if info else None),
                        cut(info.container if info else None),
                        *process_job(snap, process.pid),
                    ],
                )
            )
    rows.sort(key=lambda row: -row[0])
    family = GaugeMetricFamily(
        "gpuherd_process_gpu_memory_bytes",
        f"GPU memory of one process (bytes); the largest {MAX_PROCESSES} per host.",
        labels=(*GPU_LABELS, "pid", "user", "container", *job_label_names(snap)),
    )
    for used, labels in rows[:MAX_PROCESSES]:
        family.add_metric(labels, used)
    yield family
    yield _count(
        "gpuherd_processes_unexported",
        "GPU processes beyond the series cap.",
        snap.host,
        max(0, len(rows) - MAX_PROCESSES),
    )


def task_families(snap: ExportSnapshot) -> Iterator[Metric]:
    """Training metrics and health of each task (at most `MAX_TASKS`), named by short label."""
    chosen = sorted(snap.tasks, key=_task_order)[:MAX_TASKS]
    index_of = {device.uuid: str(device.index) for device in snap.gpus}
    families = {
        name: GaugeMetricFamily(name, text, labels=(*TASK_LABELS, *extra))
        for name, text, extra in _TASK_FAMILIES
    }
    for view, task in zip(chosen, _unique_labels(chosen), strict=True):
        _add_task(families, snap.host, task, view, index_of)
    yield from families.values()
    yield _count(
        "gpuherd_tasks_unexported",
        "Tasks beyond the series cap.",
        snap.host,
        max(0, len(snap.tasks) - MAX_TASKS),
    )


_TASK_FAMILIES = (
    ("gpuherd_task_loss", "The task's last training loss.", ()),
    (
        "gpuherd_task_validation",
        "The task's last validation metric (which one: `metric`).",
        ("metric",),
    ),
    ("gpuherd_task_throughput", "The task's throughput, in the unit `unit` names.", ("unit",)),
    ("gpuherd_task_eta_seconds", "Seconds until the task's run should end.", ()),
    ("gpuherd_task_step", "The task's last step.", ()),
    ("gpuherd_task_status", "1 for the task's status, 0 for the others.", ("status",)),
    (
        "gpuherd_task_findings",
        "How often the task showed each kind of health finding (0: never).",
        ("kind",),
    ),
    ("gpuherd_task_gpu", "1 for each GPU the task runs on.", ("gpu", "uuid")),
)


def _add_task(
    families: dict[str, GaugeMetricFamily],
    host: str,
    task: str,
    view: TaskView,
    index_of: dict[str, str],
) -> None:
    labels = [host, task]
    values = dict(view.latest)
    loss = next((values[n] for n in LOSS_NAMES if n in values), None)
    if loss is not None:
        families["gpuherd_task_loss"].add_metric(labels, loss)
    val = next(((n, values[n]) for n in VALIDATION_NAMES if n in values), None)
    if val is not None:
        families["gpuherd_task_validation"].add_metric([*labels, val[0]], val[1])
    unit = THROUGHPUT_UNITS.get(view.throughput_name or "")
    if view.throughput is not None and unit is not None:
        families["gpuherd_task_throughput"].add_metric([*labels, unit], view.throughput)
    if view.eta_s is not None:
        families["gpuherd_task_eta_seconds"].add_metric(labels, view.eta_s)
    if view.step is not None:
        families["gpuherd_task_step"].add_metric(labels, view.step)
    for status in STATUSES:
        families["gpuherd_task_status"].add_metric([*labels, status], float(view.status == status))
    counts = dict.fromkeys(FINDING_KINDS, 0)
    for finding in view.findings:
        kind = finding.kind if finding.kind in counts else "other"
        counts[kind] += finding.count
    for kind, count in counts.items():
        families["gpuherd_task_findings"].add_metric([*labels, kind], count)
    for uuid in view.gpu_uuids:
        if uuid in index_of:
            families["gpuherd_task_gpu"].add_metric([*labels, index_of[uuid], cut(uuid)], 1.0)


def _task_order(view: TaskView) -> tuple[Any, ...]:
    last = view.last_progress_at
    return (
        view.status != "running",
        -(last if last is not None and math.isfinite(last) else -math.inf),
        view.label,
        view.task_id,
    )


def _unique_labels(views: list[TaskView]) -> list[str]:
    """Short labels, with `#2`, `#3` added where two tasks share one (two `version_0`s)."""
    used: set[str] = set()
    out = []
    for view in views:
        base = name = cut(view.label)[: MAX_LABEL_CHARS - 4]
        n = 1
        while name in used:  # a duplicate series would make Prometheus drop the whole scrape
            n += 1
            name = f"{base}#{n}"
        used.add(name)
        out.append(name)
    return out


def _count(name: str, text: str, host: str, value: int) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text, labels=("host",))
    family.add_metric([host], value)
    return family

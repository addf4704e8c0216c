"""The Slurm jobs of a node as metric families, and the job label of GPU and process series.

Only on a Slurm node (`ExportSnapshot.slurm` set): elsewhere no family, and the GPU and process
series keep their labels. A job's name is the one free-text label; it is cut like every other.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from collectors.samples import GpuSample
from gpuherd.export.state import ExportSnapshot

MAX_SLURM_JOBS = 64
"""Job series sets per scrape (a node runs about as many jobs as it has cores at most)."""
MAX_LABEL_CHARS = 64
JOB_LABEL = "slurm_job"


def job_label_names(snap: ExportSnapshot) -> tuple[str, ...]:
    """The extra label of GPU and process series: `slurm_job` on a Slurm node."""
    return (JOB_LABEL,) if snap.slurm is not None else ()


def gpu_job(snap: ExportSnapshot, device: GpuSample) -> list[str]:
    """The `slurm_job` value of a GPU: the job Slurm gave it ('' for none)."""
    if snap.slurm is None:
        return []
    job = snap.slurm.job_of_gpu(device.index)
    return [job.job_id if job else ""]


def process_job(snap: ExportSnapshot, pid: int) -> list[str]:
    """The `slurm_job` value of a process ('' outside a job)."""
    if snap.slurm is None:
        return []
    found = snap.slurm.job_of(pid)
    return [found.job_id if found else ""]


def slurm_families(snap: ExportSnapshot) -> Iterator[Metric]:
    """`gpuherd_slurm_job_info`, `..._gpus` and `..._time_left_seconds`, per job on the node."""
    if snap.slurm is None:
        return
    labels = ("host", JOB_LABEL)
    info = GaugeMetricFamily(
        "gpuherd_slurm_job_info",
        "One series per Slurm job on this node: its user, name, partition and state (value 1).",
        labels=(*labels, "user", "name", "partition", "state"),
    )
    gpus = GaugeMetricFamily(
        "gpuherd_slurm_job_gpus", "GPUs Slurm allocated to the job on this node.", labels=labels
    )
    left = GaugeMetricFamily(
        "gpuherd_slurm_job_time_left_seconds",
        "Seconds until the job's time limit (left out for a job without one).",
        labels=labels,
    )
    for job in snap.slurm.jobs[:MAX_SLURM_JOBS]:
        ids = [snap.host, job.job_id]
        info.add_metric(
            [
                *ids,
                *(
                    value[:MAX_LABEL_CHARS]
                    for value in (job.user, job.name, job.partition, job.state)
                ),
            ],
            1.0,
        )
        gpus.add_metric(ids, float(len(job.gpu_indexes or ())))
        if job.time_left_s is not None:
            left.add_metric(ids, float(job.time_left_s))
    yield from (info, gpus, left)

"""Exporter series on a Slurm node: the job label on GPU and process series, the job families."""

from __future__ import annotations

from collectors.base import Sampled
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from collectors.slurm.samples import ProcessJob, SlurmJob, SlurmTick
from gpuherd.export.state import ExportState
from tests.fakes import GiB
from tests.unit.test_export_metrics import one, scrape

DEVICES = (
    GpuSample(
        0,
        "GPU-a",
        "H100",
        memory_used_bytes=30 * GiB,
        gpu_util_pct=90.0,
        processes=(GpuProcess(4242, 29 * GiB),),
    ),
    GpuSample(
        1,
        "GPU-b",
        "H100",
        memory_used_bytes=1 * GiB,
        gpu_util_pct=0.0,
        processes=(GpuProcess(777, 1 * GiB),),
    ),
)
JOBS = SlurmTick(
    100.0,
    "gpu01",
    (
        SlurmJob("4711", "ana", "vit", "gpu", "RUNNING", 60, 3660, (0,), 1),
        SlurmJob("4712", "bo", "cpu-only", "cpu", "RUNNING", 10, None, (), 0),
    ),
    (ProcessJob(4242, "4711", "0", "cgroup"),),
)


def _state(with_slurm: bool) -> ExportState:
    state = ExportState("box")
    state.emit(Sampled("nvml", GpuTick(100.0, DEVICES)))
    state.emit(
        Sampled(
            "host",
            HostSample(
                100.0,
                processes=(
                    ProcessInfo(4242, "ana", "python train.py"),
                    ProcessInfo(777, "root", "python x.py"),
                ),
            ),
        )
    )
    if with_slurm:
        state.emit(Sampled("slurm", JOBS))
    return state


def test_gpu_and_process_series_carry_the_job_so_a_panel_can_sum_per_job():
    found = scrape(_state(with_slurm=True))
    assert one(found, "gpuherd_gpu_utilization_ratio", gpu="0", slurm_job="4711") == 0.9
    assert one(found, "gpuherd_gpu_utilization_ratio", gpu="1", slurm_job="") == 0.0
    assert one(found, "gpuherd_process_gpu_memory_bytes", pid="4242", slurm_job="4711") == 29 * GiB
    assert one(found, "gpuherd_process_gpu_memory_bytes", pid="777", slurm_job="") == GiB
    (info,) = [ls for ls, v in found["gpuherd_slurm_job_info"] if ls["slurm_job"] == "4711"]
    assert info == {
        "host": "box",
        "slurm_job": "4711",
        "user": "ana",
        "name": "vit",
        "partition": "gpu",
        "state": "RUNNING",
    }
    assert one(found, "gpuherd_slurm_job_gpus", slurm_job="4711") == 1.0
    assert one(found, "gpuherd_slurm_job_gpus", slurm_job="4712") == 0.0
    assert one(found, "gpuherd_slurm_job_time_left_seconds", slurm_job="4711") == 3600.0
    assert not any(
        ls["slurm_job"] == "4712" for ls, _ in found["gpuherd_slurm_job_time_left_seconds"]
    )


def test_without_slurm_no_series_gets_the_label_and_no_job_family_appears():
    found = scrape(_state(with_slurm=False))
    assert not any(name.startswith("gpuherd_slurm") for name in found)
    for name in (
        "gpuherd_gpu_utilization_ratio",
        "gpuherd_process_gpu_memory_bytes",
        "gpuherd_gpu_info",
    ):
        assert all("slurm_job" not in labels for labels, _ in found[name])

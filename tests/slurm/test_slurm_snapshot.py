"""`gpuherd snapshot` on a real Slurm node: the jobs here, and the job of each GPU process.

The GPUs are the NVML fake (this machine has none); the process a fake GPU lists is the real
`sleep` of a real Slurm job, so the mapping is Slurm's own.
"""

from __future__ import annotations

import json
import re

import pytest

from collectors.machine.nvml import ProcessEntry
from gpuherd.snapshot.snapshot import render_table, take_snapshot, to_json
from tests.fakes import FakeGpu, FakeNvml, GiB
from tests.slurm_env import SlurmJobs

pytestmark = pytest.mark.slurm


@pytest.fixture(autouse=True)
def _no_container_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def _gpus(pid_on_0: int, util_1: int = 0) -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                name="H100",
                uuid="GPU-a",
                total=80 * GiB,
                used=30 * GiB,
                util=(80, 40),
                compute=[ProcessEntry(pid_on_0, 29 * GiB)],
            ),
            FakeGpu(name="H100", uuid="GPU-b", total=80 * GiB, used=10 * GiB, util=(util_1, 0)),
        ]
    )


def test_snapshot_json_lists_the_job_and_names_the_job_of_its_process(
    slurm_jobs: SlurmJobs,
) -> None:
    job_id, pid = slurm_jobs.running(
        "sleep 120", "--gres=gpu:2", "--job-name=vit", "--time=1:00:00"
    )
    data = to_json(take_snapshot(_gpus(pid), window_s=0.0))
    json.dumps(data, allow_nan=False)
    (job,) = [j for j in data["slurm"]["jobs"] if j["job_id"] == job_id]
    assert (job["user"], job["name"], job["partition"], job["state"]) == (
        "root",
        "vit",
        "debug",
        "RUNNING",
    )
    assert job["gpu_indexes"] == [0, 1] and job["gpus_from_slurm"] is True
    assert job["gpu_memory_used_bytes"] == 40 * GiB
    assert job["gpu_util_pct"] == 40.0
    assert job["time_limit_s"] == 3600
    (process,) = data["gpus"][0]["processes"]
    assert (process["slurm_job"], process["slurm_step"]) == (job_id, "batch")


def test_snapshot_table_shows_the_job_line(slurm_jobs: SlurmJobs) -> None:
    job_id, pid = slurm_jobs.running("sleep 120", "--gres=gpu:1", "--job-name=bert")
    table = render_table(take_snapshot(_gpus(pid), window_s=0.0), width=None)
    assert re.search(
        rf"job {job_id}  root  bert  debug  RUNNING  GPUs 0  VRAM 30\.0 GiB  "
        r"util 80%",
        table,
    ), table
    assert re.search(rf" {pid} .* job {job_id}\.batch sleep 120$", table, re.M), table


def test_a_process_outside_slurm_has_no_job(slurm_jobs: SlurmJobs) -> None:
    import os

    slurm_jobs.running("sleep 120", "--gres=gpu:1")
    data = to_json(take_snapshot(_gpus(os.getpid()), window_s=0.0))
    (process,) = data["gpus"][0]["processes"]
    assert process["slurm_job"] is None and process["slurm_step"] is None

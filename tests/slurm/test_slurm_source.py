"""The Slurm source on the machine's real Slurm: jobs on this node, their GPUs, their pids."""

from __future__ import annotations

import pytest

from collectors.machine.host import PidWatch
from collectors.slurm.collector import SlurmCollector
from collectors.slurm.pids import PidJobs
from tests.slurm_env import SlurmJobs, wait_for

pytestmark = pytest.mark.slurm


def _opened(pids: set[int] | None = None) -> SlurmCollector:
    collector = SlurmCollector(PidWatch(pids or ()))
    collector.open()
    return collector


def test_a_running_job_is_listed_with_its_gpus_and_its_process(slurm_jobs: SlurmJobs) -> None:
    job_id, pid = slurm_jobs.running("sleep 120", "--gres=gpu:2", "--job-name=train-a", "--time=10")
    tick = _opened({pid}).sample()
    job = tick.job(job_id)
    assert job is not None, tick.jobs
    assert (job.user, job.name, job.partition, job.state) == ("root", "train-a", "debug", "RUNNING")
    assert job.gpu_indexes == (0, 1)
    assert job.gpus_requested == 2
    assert job.time_limit_s == 600
    assert job.time_left_s is not None and 540 < job.time_left_s <= 600
    found = tick.job_of(pid)
    assert found is not None and found.label == f"job {job_id}.batch"
    assert tick.job_of_gpu(1) == job


def test_two_jobs_get_different_gpus_and_a_job_without_gpus_none(slurm_jobs: SlurmJobs) -> None:
    first, _ = slurm_jobs.running("sleep 120", "--gres=gpu:1")
    second, _ = slurm_jobs.running("sleep 120", "--gres=gpu:1")
    plain, _ = slurm_jobs.running("sleep 120")
    tick = _opened().sample()
    got = {j.job_id: j.gpu_indexes for j in tick.jobs}
    assert sorted([got[first], got[second]]) == [(0,), (1,)]
    assert got[plain] == ()


def test_a_process_of_no_job_is_named_by_none(slurm_jobs: SlurmJobs) -> None:
    import os

    slurm_jobs.running("sleep 120")
    tick = _opened({os.getpid()}).sample()
    assert tick.job_of(os.getpid()) is None


def test_listpids_names_the_step_of_a_process_whose_environment_is_unreadable(
    slurm_jobs: SlurmJobs, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    job_id, pid = slurm_jobs.running("sleep 120")
    # A /proc without the process's files: only slurmd can name its job.
    calls: list[int] = []

    def listpids() -> str:
        calls.append(1)
        import subprocess

        return subprocess.run(
            ["scontrol", "listpids"], capture_output=True, text=True, check=True
        ).stdout

    mapper = PidJobs(str(tmp_path), listpids)
    (found,) = mapper.map({pid}, jobs_running=True)
    assert (found.job_id, found.step, found.found_by) == (job_id, "batch", "listpids")
    mapper.map({pid}, jobs_running=True)
    assert len(calls) == 1, "a pid once found is not asked about again"


def test_an_ended_job_leaves_the_next_tick(slurm_jobs: SlurmJobs) -> None:
    job_id, _ = slurm_jobs.running("sleep 120")
    collector = SlurmCollector(PidWatch(), refresh_s=0.0)
    collector.open()
    assert collector.sample().job(job_id) is not None
    slurm_jobs.cancel_all()
    wait_for(lambda: collector.sample().job(job_id) is None, f"job {job_id} to leave")


def test_the_root_runs_the_slurm_source_on_a_slurm_node(slurm_node: None) -> None:
    from gpuherd.sources import LiveSources, SourceOptions

    sources = LiveSources(SourceOptions(containers=False))
    (slurm,) = [c for c in sources.machine() if isinstance(c, SlurmCollector)]
    assert slurm.pid_watch is sources.pid_watch, "it maps the GPU pids the root watches"
    assert not any(
        isinstance(c, SlurmCollector) for c in LiveSources(SourceOptions(slurm=False)).machine()
    )


def test_squeue_runs_every_refresh_and_at_once_for_a_process_of_a_new_job(
    slurm_jobs: SlurmJobs,
) -> None:
    from collectors.slurm.commands import run_slurm

    calls: list[str] = []

    def counting(argv):  # type: ignore[no-untyped-def]
        calls.append(argv[0])
        return run_slurm(argv)

    now = [1000.0]
    watch = PidWatch()
    first, _ = slurm_jobs.running("sleep 120")
    collector = SlurmCollector(watch, runner=counting, refresh_s=5.0, clock=lambda: now[0])
    collector.open()
    running = collector.sample().job(first)
    assert running is not None and running.elapsed_s is not None
    calls.clear()
    now[0] += 4.0
    aged = collector.sample().job(first)
    assert calls == [], "within the refresh nothing is asked of Slurm"
    assert aged is not None and aged.elapsed_s == running.elapsed_s + 4
    second, pid = slurm_jobs.running("sleep 120")
    watch.set({pid})
    now[0] += 0.5
    tick = collector.sample()
    assert calls.count("squeue") == 1, "a process of an unlisted job reads the jobs at once"
    assert tick.job(second) is not None and tick.job_of(pid) is not None
    calls.clear()
    now[0] += 5.0
    collector.sample()
    assert calls == ["squeue"]


def test_a_pid_seen_before_its_job_is_listed_is_asked_about_again(
    slurm_jobs: SlurmJobs, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    job_id, pid = slurm_jobs.running("sleep 120")

    def listpids() -> str:
        return subprocess.run(
            ["scontrol", "listpids"], capture_output=True, text=True, check=True
        ).stdout

    mapper = PidJobs(str(tmp_path), listpids)  # no /proc files: only slurmd can tell
    assert mapper.map({pid}, jobs_running=False) == ()
    (found,) = mapper.map({pid}, jobs_running=True)
    assert found.job_id == job_id

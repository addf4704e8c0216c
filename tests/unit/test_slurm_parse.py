"""Slurm's text outputs read purely: durations, GRES indexes, hostlists, squeue lines, cgroups."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.slurm.commands import last_line, slurm_missing
from collectors.slurm.parse import (
    SEP,
    expand_hostlist,
    gpu_indexes_of_gres,
    gpu_indexes_on_node,
    gpus_requested,
    parse_duration,
    parse_indexes,
    parse_listpids,
    parse_squeue_line,
)
from collectors.slurm.pids import job_of_cgroup, job_of_environ


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:59", 59),
        ("1:00", 60),
        ("1:00:00", 3600),
        ("2-03:04:05", 2 * 86400 + 11045),
        ("UNLIMITED", None),
        ("N/A", None),
        ("INVALID", None),
        ("NOT_SET", None),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_every_written_duration_reads_back(days, hours, minutes, seconds):
    text = f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    assert parse_duration(text) == ((days * 24 + hours) * 60 + minutes) * 60 + seconds


@pytest.mark.parametrize(
    ("gres", "indexes"),
    [
        ("gpu:1(IDX:0)", (0,)),
        ("gpu:a100:2(IDX:0-1)", (0, 1)),
        ("gpu:3(IDX:0,2-3)", (0, 2, 3)),
        ("gpu:a100:1(IDX:1),nic:1(IDX:0)", (1,)),
        ("gpu:tesla:2(IDX:4-5),gpu:v100:1(IDX:7)", (4, 5, 7)),
        ("nic:1(IDX:0)", ()),
        ("gpu:1(IDX:N/A)", ()),
    ],
)
def test_gres_indexes(gres, indexes):
    assert gpu_indexes_of_gres(gres) == indexes


def test_indexes_ranges():
    assert parse_indexes("0-2,5,7-8") == (0, 1, 2, 5, 7, 8)


@pytest.mark.parametrize(
    ("tres", "count"),
    [
        ("gres:gpu:2", 2),
        ("gres/gpu:a100=4", 4),
        ("gres:gpu:a100:3", 3),
        ("N/A", 0),
        ("gres:nic:1", 0),
        ("gres:gpu:1,gres:nic:1", 1),
    ],
)
def test_gpus_requested(tres, count):
    assert gpus_requested(tres) == count


def test_hostlists():
    assert expand_hostlist("gpu[01-03,7],login") == ["gpu01", "gpu02", "gpu03", "gpu7", "login"]
    assert expand_hostlist("vm") == ["vm"]


def test_detail_of_a_job_on_two_node_groups_names_this_nodes_gpus():
    detail = (
        "JobId=7 JobName=x NumNodes=3 JOB_GRES=gpu:4   Nodes=gpu[01-02] CPU_IDs=0-3 "
        "Mem=100 GRES=gpu:2(IDX:0-1)   Nodes=gpu03 CPU_IDs=0 Mem=100 GRES=gpu:2(IDX:2-3) "
        "MinCPUsNode=1 Features=(null)"
    )
    assert gpu_indexes_on_node(detail, "gpu02") == (0, 1)
    assert gpu_indexes_on_node(detail, "gpu03") == (2, 3)
    assert gpu_indexes_on_node(detail, "gpu04") is None
    no_gres = "JobId=8 JOB_GRES=(null)   Nodes=vm CPU_IDs=0 Mem=256 MinCPUsNode=1"
    assert gpu_indexes_on_node(no_gres, "vm") == ()


def test_squeue_line_with_an_array_task_and_a_separator_in_the_name():
    line = SEP.join(
        [
            "4711",
            "4700_3",
            "ana",
            "gpu",
            "RUNNING",
            "1:02:03",
            "2:00:00",
            "gres:gpu:1",
            f"odd{SEP}name",
        ]
    )
    job = parse_squeue_line(line)
    assert job is not None
    assert (job.job_id, job.array_id, job.shown_id) == ("4711", "4700_3", "4700_3")
    assert (job.elapsed_s, job.time_limit_s, job.time_left_s) == (3723, 7200, 3477)
    assert job.name == f"odd{SEP}name" and job.gpus_requested == 1
    assert parse_squeue_line("JOBID whatever") is None


def test_listpids():
    text = (
        "PID      JOBID    STEPID   LOCALID GLOBALID\n25487    1        batch    0       0\n"
        "25488    1        0        -       -\nnonsense\n"
    )
    assert parse_listpids(text) == {25487: ("1", "batch"), 25488: ("1", "0")}


@pytest.mark.parametrize(
    ("cgroup", "found"),
    [
        ("4:memory:/slurm/uid_1000/job_4711/step_0/task_0\n", ("4711", "0")),
        ("7:freezer:/slurm_gpu01/uid_0/job_12/step_batch\n", ("12", "batch")),
        (
            "0::/system.slice/slurmstepd.scope/job_4711/step_extern/user/task_0\n",
            ("4711", "extern"),
        ),
        ("0::/system.slice/slurmstepd.scope/job_9\n", ("9", None)),
        ("0::/user.slice/user-1000.slice/job_5/step_0\n", None),  # not Slurm's
        ("4:memory:/docker/abc\n0::/\n", None),
    ],
)
def test_cgroup_paths(cgroup, found):
    assert job_of_cgroup(cgroup) == found


def test_environment():
    assert job_of_environ(b"A=1\0SLURM_JOB_ID=42\0SLURM_STEP_ID=3\0") == ("42", "3")
    assert job_of_environ(b"SLURM_JOB_ID=42\0") == ("42", "batch")
    assert job_of_environ(b"SLURM_JOB_ID=\0") is None
    assert job_of_environ(b"PATH=/bin\0") is None


def test_slurms_reason_is_its_last_line_without_the_prefix():
    reason = "Batch job submission failed: Invalid partition name specified"
    assert last_line(f"sbatch: error: {reason}\n") == reason
    assert last_line("") == ""


def test_no_slurm_commands_no_configuration_or_no_slurmd_is_no_slurm(tmp_path):
    assert slurm_missing({"PATH": str(tmp_path)}) == "no Slurm here (scontrol is not on PATH)"
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    conf = tmp_path / "slurm.conf"
    env = {"PATH": str(tmp_path), "SLURM_CONF": str(conf)}
    proc = tmp_path / "proc"
    (proc / "17").mkdir(parents=True)
    (proc / "17" / "comm").write_text("slurmstepd\n")
    assert "no slurm.conf" in (slurm_missing(env, (), str(proc)) or "")
    conf.write_text("ClusterName=x\n")
    assert "no Slurm compute node" in (slurm_missing(env, (), str(proc)) or "")
    (proc / "23").mkdir()
    (proc / "23" / "comm").write_text("slurmd\n")
    assert slurm_missing(env, conf_paths=(), proc_root=str(proc)) is None


def test_snapshot_without_slurm_says_nothing_of_it(tmp_path, monkeypatch):
    from gpuherd.snapshot.snapshot import take_snapshot, to_json
    from tests.fakes import FakeNvml

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    data = to_json(take_snapshot(FakeNvml([]), window_s=0.0))
    assert data["slurm"] is None


def test_without_slurm_the_root_builds_no_slurm_source(tmp_path, monkeypatch):
    from collectors.slurm.collector import SlurmCollector
    from gpuherd.sources import LiveSources, SourceOptions

    monkeypatch.setenv("PATH", str(tmp_path))
    collectors = LiveSources(SourceOptions(containers=False)).machine()
    assert not any(isinstance(c, SlurmCollector) for c in collectors)


def test_slurm_can_be_turned_off():
    assert slurm_missing({"GPUHERD_SLURM": "off", "PATH": "/usr/bin"}) == (
        "Slurm is turned off (GPUHERD_SLURM=off)"
    )

"""`queue add` flags of the Slurm hand-off: each only in its mode; the batch script's quoting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.queue.slurm_submit import batch_script, sbatch_argv, slurm_reason

ROOT = Path(__file__).resolve().parents[2]


def _queue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUHERD_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--partition", "gpu"), "--partition is only for Slurm jobs (--slurm)"),
        (("--time", "10"), "--time is only for Slurm jobs (--slurm)"),
        (("--record-dir", "x"), "--record-dir is only for Slurm jobs (--slurm)"),
        (
            ("--slurm", "--after", "1"),
            "--after is only for jobs this queue starts, not with --slurm",
        ),
        (("--slurm", "--retry-oom"), "--retry-oom is only for jobs this queue starts"),
        (("--slurm", "--max-util", "50"), "--max-util is only for jobs this queue starts"),
    ],
)
def test_a_flag_outside_its_mode_is_a_usage_error(tmp_path, flags, said):
    out = _queue(tmp_path, "add", *flags, "--", "true")
    assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr


def test_without_slurm_a_submission_is_one_line(tmp_path, monkeypatch):
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}:/usr/bin/nonexistent",
        GPUHERD_STATE_DIR=str(tmp_path / "state"),
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "queue",
            "add",
            "--slurm",
            "--",
            sys.executable,
            "-c",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr == "gpuherd queue add: --slurm: sbatch is not on PATH (no Slurm here)\n"


def test_the_batch_script_quotes_every_argument(tmp_path):
    script = batch_script(
        ["python", "train.py", "--name", "it's $HOME"],
        tmp_path / "s d",
        {"RUN": "a b"},
        python="/opt/py",
    )
    last = script.splitlines()[-1]
    assert last == (
        f"exec /opt/py -m gpuherd record '{tmp_path}/s d/job-'\"$SLURM_JOB_ID\" -- "
        "python train.py --name 'it'\"'\"'s $HOME'"
    )
    assert "export RUN='a b'" in script
    out = subprocess.run(["sh", "-n", "-c", script], capture_output=True)
    assert out.returncode == 0


def test_sbatch_gets_the_gpus_partition_and_time():
    argv = sbatch_argv("train", 2, "/w", Path("/w/s"), "gpu", "2:00:00")
    assert argv[-3:] == ["--gres=gpu:2", "--partition=gpu", "--time=2:00:00"]
    assert "--gres=gpu:0" not in sbatch_argv("cpu", 0, "/w", Path("/w/s"), None, None)


def test_slurms_reason_keeps_every_error_line_once():
    said = slurm_reason(
        "sbatch: error: invalid partition specified: x\n"
        "sbatch: error: Batch job submission failed: Invalid partition name\n"
    )
    assert said == (
        "invalid partition specified: x; Batch job submission failed: Invalid partition name"
    )

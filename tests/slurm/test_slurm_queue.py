"""`gpuherd queue add --slurm` on a real Slurm: submit, follow, cancel, exit code, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm_env import SlurmJobs, wait_for

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
EVERY_S = 0.5
"""Between two `queue ls` runs while waiting: each is a Python start, a third of a core-second."""


@pytest.fixture
def queue(tmp_path: Path, slurm_node: None):  # type: ignore[no-untyped-def]
    """Runs `gpuherd queue ...` with its own state directory; cancels its Slurm jobs after."""
    env = dict(os.environ, GPUHERD_STATE_DIR=str(tmp_path / "state"))
    submitted: list[str] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [sys.executable, "-m", "gpuherd", "queue", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
        if args[:1] == ("add",) and out.returncode == 0:
            submitted.append(out.stdout.split()[3])
        return out

    yield run
    if submitted:
        subprocess.run(["scancel", *submitted], capture_output=True, check=False)


def _listed(queue, job_id: str) -> dict:  # type: ignore[no-untyped-def]
    out = queue("ls", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = [r for r in json.loads(out.stdout) if (r.get("slurm") or {}).get("job_id") == job_id]
    return row


def _ended(queue, job_id: str) -> dict | None:  # type: ignore[no-untyped-def]
    row = _listed(queue, job_id)
    return row if row["state"] in ("done", "failed", "cancelled") else None


def test_a_submitted_command_runs_recorded_and_its_exit_code_is_listed(queue, tmp_path):
    out = queue(
        "add",
        "--slurm",
        "--time",
        "5",
        "--name",
        "three",
        "--",
        "sh",
        "-c",
        "echo from-the-job; exit 3",
    )
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.split()[3]
    assert out.stdout.startswith(f"submitted Slurm job {job_id} (three) on 1 GPU")
    row = wait_for(lambda: _ended(queue, job_id), f"Slurm job {job_id} to end", 60, EVERY_S)
    assert (row["state"], row["exit_code"]) == ("failed", 3)
    assert row["slurm"]["state"] == "FAILED" and row["slurm"]["node"]
    assert row["slurm"]["time_limit"] == "5"
    session = Path(row["session_dir"])
    assert session == tmp_path / "gpuherd-sessions" / f"job-{job_id}"
    assert row["summary"] == str(session / "summary.md")
    assert "from-the-job" in (session / "command.log").read_text()
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit_code"] == 3
    assert (meta["slurm"]["job_id"], meta["slurm"]["step"]) == (job_id, "batch")
    assert f",job,{job_id},,root,three,debug,RUNNING,300," in (session / "slurm.csv").read_text()
    assert (
        f"- Recorded inside Slurm job {job_id}, step batch" in (session / "summary.md").read_text()
    )
    table = queue("ls").stdout
    assert f"{job_id}  three" in table and "FAILED" in table


def test_a_job_that_succeeds_is_done_with_exit_code_0(queue):
    out = queue("add", "--slurm", "--gpus", "2", "--", "true")
    job_id = out.stdout.split()[3]
    row = wait_for(lambda: _ended(queue, job_id), f"Slurm job {job_id} to end", 60, EVERY_S)
    assert (row["state"], row["exit_code"], row["gpus"]) == ("done", 0, 2)


def test_a_cancelled_job_is_listed_cancelled(queue):
    job_id = queue("add", "--slurm", "--", "sleep", "300").stdout.split()[3]
    wait_for(
        lambda: _listed(queue, job_id)["state"] == "running",
        f"job {job_id} to run",
        every_s=EVERY_S,
    )
    out = queue("cancel", "--slurm", job_id)
    assert out.returncode == 0 and out.stdout.startswith(f"asked Slurm to cancel job {job_id}")
    row = wait_for(lambda: _ended(queue, job_id), f"Slurm job {job_id} to end", 60, EVERY_S)
    assert row["state"] == "cancelled" and row["slurm"]["state"] == "CANCELLED"


def test_a_job_waiting_for_gpus_shows_slurms_reason(queue, slurm_jobs: SlurmJobs):
    for _ in range(2):
        slurm_jobs.running("sleep 300", "--gres=gpu:1")
    job_id = queue("add", "--slurm", "--", "true").stdout.split()[3]
    row = wait_for(
        lambda: (r := _listed(queue, job_id))["slurm"]["reason"] and r,
        "a pending reason",
        every_s=EVERY_S,
    )
    assert row["state"] == "waiting"
    assert row["slurm"]["state"] == "PENDING" and row["slurm"]["reason"] in (
        "Resources",
        "Priority",
    )


def test_a_refused_submission_is_one_line_with_slurms_reason(queue, tmp_path):
    out = queue("add", "--slurm", "--partition", "nosuch", "--", "true")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("gpuherd queue add: Slurm refused the job: ")
    assert "Invalid partition name specified" in out.stderr
    assert "[]" == queue("ls", "--json").stdout.strip()


def test_more_gpus_than_the_cluster_has_is_refused(queue):
    out = queue("add", "--slurm", "--gpus", "3", "--", "true")
    assert out.returncode == 2
    assert out.stderr.startswith("gpuherd queue add: Slurm refused the job: ")
    assert "Requested node configuration is not available" in out.stderr


def test_cancel_of_a_job_this_queue_did_not_submit_is_refused(queue, slurm_jobs: SlurmJobs):
    other = slurm_jobs.submit("sleep 300")
    out = queue("cancel", "--slurm", other)
    assert out.returncode == 2
    assert f"no Slurm job {other} was submitted by this queue" in out.stderr
    assert slurm_jobs.state(other) in ("PENDING", "RUNNING")


def test_a_job_slurm_no_longer_lists_is_read_from_its_recording(queue, tmp_path):
    from gpuherd.queue.slurm_ledger import SlurmLedger, SlurmSubmission
    from gpuherd.queue.slurm_status import statuses

    session = tmp_path / "old-job"
    subprocess.run(
        [sys.executable, "-m", "gpuherd", "record", str(session), "--", "sh", "-c", "exit 4"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    entry = SlurmSubmission("999999", "old", ("sh",), str(tmp_path), str(session), 0.0)
    SlurmLedger(tmp_path / "state").append(entry)
    found, note = statuses([entry])
    assert found["999999"].source == "session" and found["999999"].exit_code == 4
    assert note == "Slurm accounting storage is disabled"  # this CI Slurm has no slurmdbd
    row = _listed(queue, "999999")
    assert (row["state"], row["exit_code"]) == ("failed", 4)
    assert "sacct: Slurm accounting storage is disabled" in queue("ls").stdout

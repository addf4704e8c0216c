"""slurm.csv: rows only for changes; the summary's Slurm part, damaged rows skipped."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from collectors.session.session_format import SLURM_COLUMNS
from collectors.slurm.samples import ProcessJob, SlurmJob, SlurmTick
from gpuherd.record.slurm_record import SlurmRecord, slurm_meta
from gpuherd.summary.slurm_summary import slurm_lines, slurm_summary

JOB = SlurmJob("4711", "ana", "vit", "gpu", "RUNNING", 60, 3600, (0, 1), 2)


def _csv(rows) -> str:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SLURM_COLUMNS)
    writer.writerows(rows)
    return out.getvalue()


def test_a_job_is_written_when_it_appears_changes_and_leaves_and_a_process_once():
    record = SlurmRecord()
    first = record.rows(SlurmTick(1.0, "n", (JOB,)))
    assert first == [
        (1.0, "job", "4711", None, "ana", "vit", "gpu", "RUNNING", 3600, "0 1", None, None)
    ]
    assert record.rows(SlurmTick(2.0, "n", (JOB,))) == [], "an unchanged job writes nothing"
    with_pid = record.rows(SlurmTick(3.0, "n", (JOB,), (ProcessJob(42, "4711", "0", "cgroup"),)))
    assert with_pid == [
        (3.0, "process", "4711", None, "ana", "vit", "gpu", "RUNNING", 3600, "0 1", 42, "0")
    ]
    assert record.rows(SlurmTick(4.0, "n", (JOB,), (ProcessJob(42, "4711", "0", "cgroup"),))) == []
    suspended = SlurmJob("4711", "ana", "vit", "gpu", "SUSPENDED", 70, 3600, (0, 1), 2)
    assert record.rows(SlurmTick(5.0, "n", (suspended,)))[0][7] == "SUSPENDED"
    gone = record.rows(SlurmTick(6.0, "n", ()))
    assert gone == [
        (6.0, "gone", "4711", None, "ana", "vit", "gpu", "GONE", 3600, "0 1", None, None)
    ]


def test_the_meta_names_the_job_the_recording_runs_in():
    assert slurm_meta({}) == {}
    assert slurm_meta({"SLURM_JOB_ID": "x"}) == {}
    assert slurm_meta(
        {
            "SLURM_JOB_ID": "12",
            "SLURM_STEP_ID": "0",
            "SLURMD_NODENAME": "g1",
            "SLURM_ARRAY_JOB_ID": "10",
            "SLURM_ARRAY_TASK_ID": "2",
            "SLURM_JOB_GPUS": "0,1",
        }
    ) == {"slurm": {"job_id": "12", "array_id": "10_2", "step": "0", "node": "g1", "gpus": "0,1"}}


def test_the_summary_lists_the_jobs_seen_and_skips_damaged_rows(tmp_path: Path):
    record = SlurmRecord()
    rows = record.rows(SlurmTick(1.0, "n", (JOB,), (ProcessJob(42, "4711", "0", "cgroup"),)))
    rows += record.rows(SlurmTick(9.0, "n", ()))
    text = _csv(rows) + "not-a-time,job,999\n" + '"unclosed\n'
    (tmp_path / "slurm.csv").write_text(text)
    found = slurm_summary(tmp_path, {"slurm": {"job_id": "7", "step": "batch", "node": "n"}})
    assert found is not None
    (job,) = found["jobs_seen"]
    assert (
        job["job_id"],
        job["first_seen"],
        job["last_seen"],
        job["state"],
        job["gpus"],
        job["pids"],
    ) == ("4711", 1.0, 9.0, "GONE", [0, 1], [42])
    lines = slurm_lines({"slurm": found})
    assert "- Recorded inside Slurm job 7, step batch, on node n; GPUs -." in lines
    assert "| 4711 | ana | vit | gpu | 0,1 | GONE | 42 |" in lines
    json.dumps(found)


def test_a_session_without_slurm_has_no_slurm_part(tmp_path: Path):
    assert slurm_summary(tmp_path, {}) is None
    assert slurm_lines({}) == []


def test_a_linked_slurm_csv_is_not_followed(tmp_path: Path):
    secret = tmp_path / "elsewhere.csv"
    secret.write_text(
        _csv([(1.0, "job", "1", None, "x", "y", "p", "RUNNING", None, "", None, None)])
    )
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "slurm.csv").symlink_to(secret)
    assert slurm_summary(tmp_path / "s", {}) is None

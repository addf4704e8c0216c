"""What the verification note says: user words, failed runs, epochs as logged, mixed GPU hosts."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpuherd.note.note import compose
from gpuherd.note.note_file import write_note
from gpuherd.summary.summary import summarize
from tests.unit.test_note import EXAMPLES, training_session
from tests.unit.test_summary import GIB, T0, gpu_row, write_session

DAY = dt.datetime.fromtimestamp(T0).date().isoformat()
H100_TOTAL = 85_520_809_984
A100_TOTAL = 42_949_672_960


def with_command(root: Path, command: list[str]) -> Path:
    meta = root / "meta.json"
    meta.write_text(
        meta.read_text().replace('["python", "train.py"]', str(command).replace("'", '"'))
    )
    return root


def test_a_failed_run_leaves_last_verified_and_says_why(tmp_path: Path) -> None:
    note = compose(summarize(training_session(tmp_path / "s", exit_code=1)))
    assert note.last_verified is None
    assert note.text.startswith(
        f"Training run on NVIDIA H200 (141GB VRAM) failed on {DAY} (last_verified keeps the "
        "date of the last run that passed). "
    )
    example = tmp_path / "resnet50_finetune.yaml"
    shutil.copy(EXAMPLES / example.name, example)
    assert write_note(example, note) is True
    block = YAML(typ="rt").load(example.read_text())["verification"]
    assert block["last_verified"] == dt.date(2025, 3, 14)  # the date of the run that passed
    assert block["last_verification_note"] == note.text
    assert "  last_verified: 2025-03-14   # previous run\n" in example.read_text()


def test_the_cli_says_last_verified_was_kept(tmp_path: Path) -> None:
    session = training_session(tmp_path / "s", exit_code=1)
    example = tmp_path / "llama_lora.yaml"
    shutil.copy(EXAMPLES / example.name, example)
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "note", str(session), "--example", str(example)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "  last_verified: not changed (the run failed)\n" in out.stdout
    block = YAML(typ="rt").load(example.read_text())["verification"]
    assert list(block) == ["last_verification_note"]


def test_a_run_stopped_mid_epoch_is_not_said_to_have_trained_it(tmp_path: Path) -> None:
    root = with_command(
        training_session(tmp_path / "s", exit_code=1), ["python", "train.py", "--epochs", "4"]
    )
    note = compose(summarize(root))
    assert (
        "Stopped in epoch 3 of 4 (2 epochs completed, 1,200 steps); loss 2.31 -> 0.45" in note.text
    )
    assert "Trained" not in note.text


def test_a_finished_run_says_how_many_epochs_of_how_many(tmp_path: Path) -> None:
    early = with_command(training_session(tmp_path / "a"), ["python", "train.py", "--max_epochs=4"])
    assert "Trained 3 of 4 epochs (1,200 steps); " in compose(summarize(early)).text
    full = with_command(training_session(tmp_path / "b"), ["python", "train.py", "--epochs", "3"])
    assert "Trained 3 epochs (1,200 steps); " in compose(summarize(full)).text


def test_a_missing_source_is_said_in_words_a_user_reads(tmp_path: Path) -> None:
    root = training_session(tmp_path / "s")
    with (root / "events.jsonl").open("a") as f:
        f.write(
            '{"t": %r, "kind": "collector_unavailable", "source": "nvml", "msg": "NVML '
            'Shared Library Not Found", "title": "NVML"}\n' % (T0 + 1)
        )
        f.write(
            '{"t": %r, "kind": "collector_unavailable", "source": "log:/runs/a.log", '
            '"msg": "permission denied", "title": "log"}\n' % (T0 + 1)
        )
    text = compose(summarize(root)).text
    assert text.endswith(
        "Known limitations: no GPU readings (the NVIDIA driver could not be "
        "used); the log /runs/a.log could not be read."
    )
    assert "nvml" not in text


@pytest.mark.parametrize(
    "source", ["nvml", "nvml-memory", "docker", "writers", "discovery", "peak-probe-v2"]
)
def test_no_source_reaches_the_note_by_its_internal_name(tmp_path: Path, source: str) -> None:
    root = training_session(tmp_path / "s")
    with (root / "events.jsonl").open("a") as f:
        f.write(
            json.dumps(
                {
                    "t": T0 + 1,
                    "kind": "collector_unavailable",
                    "source": source,
                    "msg": "x",
                    "title": "x",
                }
            )
            + "\n"
        )
    limits = compose(summarize(root)).text.split("Known limitations: ", 1)[1]
    assert source not in limits and limits.startswith(("no ", "one source"))


def mixed_row(t: float, gpu: int, used: float, util: float) -> str:
    name, uuid, total = (
        ("NVIDIA H100 80GB HBM3", "GPU-h100", H100_TOTAL)
        if gpu == 0
        else ("NVIDIA A100-SXM4-40GB", "GPU-a100", A100_TOTAL)
    )
    return f"{t},{gpu},{uuid},{name},{int(used)},{total},{util},10,40,100,"


def test_a_mixed_host_without_run_peaks_names_each_gpu_and_averages_none(tmp_path: Path) -> None:
    # GPU 0 (H100) runs this training at 90 %; GPU 1 (A100) holds another user's job at 10 %.
    rows = [
        row
        for i in range(10)
        for row in (mixed_row(T0 + i, 0, 40 * GIB, 90), mixed_row(T0 + i, 1, 3 * GIB, 10))
    ]
    metrics = [
        f"{T0 + 2 + i},command,{i + 1},train/loss,{2.0 - 0.1 * i},{100 * (i + 1)},"
        for i in range(5)
    ]
    root = write_session(
        tmp_path / "s",
        gpu_rows=rows,
        metrics=metrics,
        meta={
            "gpus": [
                {
                    "index": 0,
                    "uuid": "GPU-h100",
                    "name": "NVIDIA H100 80GB HBM3",
                    "mem_total_bytes": H100_TOTAL,
                },
                {
                    "index": 1,
                    "uuid": "GPU-a100",
                    "name": "NVIDIA A100-SXM4-40GB",
                    "mem_total_bytes": A100_TOTAL,
                },
            ]
        },
    )
    text = compose(summarize(root)).text
    assert text.startswith(
        "Verified training run on NVIDIA H100 80GB HBM3 (80GB VRAM) and NVIDIA A100-SXM4-40GB "
        "(40GB VRAM). GPU usage per GPU (the session does not say which GPUs the run used): "
        "GPU 0 40.0GB VRAM (50%), 90% GPU utilization (p95 90%); GPU 1 3.0GB VRAM (8%), "
        "10% GPU utilization (p95 10%). "
    )
    assert "2x" not in text and "50% GPU utilization" not in text


def test_a_session_without_readings_is_not_called_verified(tmp_path: Path) -> None:
    example = tmp_path / "llama_lora.yaml"
    shutil.copy(EXAMPLES / example.name, example)
    empty = write_session(tmp_path / "s", gpu_rows=[])
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "note", str(empty), "--example", str(example)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "  last_verified: not changed (the session holds no readings)\n" in out.stdout
    block = YAML(typ="rt").load(example.read_text())["verification"]
    assert block["last_verification_note"].startswith("The session holds no readings")
    assert "Verified" not in block["last_verification_note"]
    assert "last_verified" not in block
    # One GPU row is a reading: the run is verified as before.
    note = compose(summarize(write_session(tmp_path / "t", gpu_rows=[gpu_row(T0, 0, GIB, 5)])))
    assert note.last_verified is not None and note.text.startswith("Verified run")


def test_a_run_stopped_at_its_duration_limit_is_no_failure(tmp_path: Path) -> None:
    root = with_command(
        training_session(tmp_path / "s", exit_code=143), ["python", "train.py", "--epochs", "4"]
    )
    with (root / "events.jsonl").open("a") as f:
        f.write(json.dumps({"t": T0 + 30, "kind": "duration_reached", "sent": "SIGTERM"}) + "\n")
    note = compose(summarize(root))
    assert note.last_verified is not None and "failed" not in note.text
    assert "Stopped in epoch 3 of 4 (2 epochs completed, 1,200 steps)" in note.text
    assert note.text.endswith("Known limitations: the command was stopped at the --duration limit.")
    # without the limit, the same exit is a failure
    plain = compose(summarize(training_session(tmp_path / "p", exit_code=143)))
    assert plain.last_verified is None and "failed" in plain.text

"""Formats are told by content first, file name second, in `gpuherd parse` and in the log tail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from parsers.registry import LATE_FORMATS, detect_format, detect_late_format
from tests.unit.test_parsers_golden import DATA, _sample

ROOT = Path(__file__).resolve().parents[2]
STATE = DATA / "hf_trainer_state" / "trainer_state.json"
KERAS_CSV = DATA / "keras_csv" / "training.log"


def parse_json(*args: str) -> tuple[int, list[dict], str]:
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_a_trainer_state_under_another_name_is_a_trainer_state(tmp_path: Path) -> None:
    copy = tmp_path / "state-backup.json"
    shutil.copy(STATE, copy)
    assert detect_format(_sample(copy), str(copy)) == "hf_trainer_state"
    status, records, _ = parse_json(str(copy))
    assert status == 0
    first = next(r for r in records if r["metric"] == "train/loss")
    assert (first["line"], first["value"], first["step"]) == (1, 3.8958333333333335, 3)
    assert {r["format"] for r in records} == {"hf_trainer_state"}


def test_a_compact_trainer_state_on_one_line_is_a_trainer_state(tmp_path: Path) -> None:
    state = json.loads(STATE.read_text())
    copy = tmp_path / "latest"
    copy.write_text(json.dumps(state))  # no indent, keys in the Trainer's order
    assert detect_format(_sample(copy), str(copy)) == "hf_trainer_state"


def test_json_that_is_no_trainer_state_is_not_one_by_content(tmp_path: Path) -> None:
    other = tmp_path / "config.json"
    other.write_text('{\n  "model_type": "gpt2",\n  "n_layer": 2\n}\n')
    assert detect_format(_sample(other), str(other)) == "generic"


def test_a_keras_csvlogger_file_keeps_its_default_name_and_is_csv() -> None:
    assert detect_format(_sample(KERAS_CSV), str(KERAS_CSV)) == "csv"


def test_a_csv_header_alone_decides_whatever_the_extension(tmp_path: Path) -> None:
    log = tmp_path / "history.txt"
    log.write_text("epoch,step,train_loss,val_loss\n0,10,1.5,\n")
    assert detect_format(_sample(log), str(log)) == "lightning_csv"
    log.write_text("epoch,loss,val_loss\n")  # header written, no row yet
    assert detect_format(_sample(log), str(log)) == "csv"


@pytest.mark.parametrize(
    "text",
    [
        "Epoch 1, loss 0.5, acc 0.9\n",  # prose with commas
        "epoch,loss\nthe run was restarted, twice\n",  # a header-like line, then prose
        "name,size\nresnet,25\n",  # a CSV with no epoch or step
    ],
)
def test_lines_with_commas_are_not_a_metrics_csv(tmp_path: Path, text: str) -> None:
    log = tmp_path / "train.log"
    log.write_text(text)
    assert detect_format(_sample(log), str(log)) == "generic"


def test_json_lines_whatever_the_extension(tmp_path: Path) -> None:
    log = tmp_path / "train.out"
    log.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    assert detect_format(_sample(log), str(log)) == "jsonl"


def test_json_records_after_banners_switch_the_parser(tmp_path: Path) -> None:
    banners = "".join(f"loading shard {i} of 300\n" for i in range(300))
    log = tmp_path / "run.log"
    log.write_text(banners + '{"step": 7, "loss": 0.25}\n')
    assert "jsonl" in LATE_FORMATS and "csv" not in LATE_FORMATS
    assert detect_late_format(['{"step": 7, "loss": 0.25}']) == "jsonl"
    status, records, _ = parse_json(str(log))
    assert status == 0
    assert [(r["line"], r["format"], r["metric"], r["value"], r["step"]) for r in records] == [
        (301, "jsonl", "train/loss", 0.25, 7)
    ]


def test_format_flag_still_overrides_the_content(tmp_path: Path) -> None:
    copy = tmp_path / "training.log"
    shutil.copy(KERAS_CSV, copy)
    status, records, err = parse_json("--format", "generic", str(copy))
    assert {r.get("format") for r in records if "metric" in r} <= {"generic"}
    assert status == 1 and "without --format it reads as csv" in err


def _tail(path: Path) -> LogTailCollector:
    collector = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0)
    collector.open()
    return collector


def _drain(collector: LogTailCollector) -> list:
    batches = []
    for _ in range(20):
        collector.wake()
        batches.append(collector.sample())
        if not batches[-1].metrics and not collector._more:
            break
    return batches


def _tail_copy(source: Path, copy: Path) -> tuple[list, list]:
    """The batches and metrics a tail reads from `source` copied to `copy` (another name)."""
    shutil.copy(source, copy)
    tail = _tail(copy)
    try:
        batches = _drain(tail)
    finally:
        tail.close()
    return batches, [m for b in batches for _, m in b.metrics]


def test_the_tail_reads_a_renamed_trainer_state_as_a_document(tmp_path: Path) -> None:
    batches, metrics = _tail_copy(STATE, tmp_path / "state.json")
    assert {b.format for b in batches} == {"hf_trainer_state"}
    assert metrics[0].step == 3 and metrics[0].as_dict()["train/loss"] == 3.8958333333333335


def test_the_tail_turns_to_a_document_once_its_text_shows_one(tmp_path: Path) -> None:
    doc = tmp_path / "state.json"
    doc.write_text("{\n")  # the writer has only begun
    tail = _tail(doc)
    try:
        first = _drain(tail)
        assert all(not b.metrics for b in first)
        shutil.copy(STATE, doc)
        batches = _drain(tail)
    finally:
        tail.close()
    metrics = [m for b in batches for _, m in b.metrics]
    assert batches[-1].format == "hf_trainer_state"
    assert [m.step for m in metrics][:3] == [3, 6, 8]


def test_the_tail_reads_a_keras_csvlogger_file_as_csv(tmp_path: Path) -> None:
    batches, metrics = _tail_copy(KERAS_CSV, tmp_path / "training.log")
    assert {b.format for b in batches if b.metrics} == {"csv"}
    assert metrics[1].epoch == 1 and metrics[1].as_dict()["val/loss"] == 7.41715145111084

"""A NaN in an evaluation table is a missing score, not a NaN loss; `nanoGPT` is a word."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from parsers.findings import findings_from_metric, scan_line
from parsers.registry import make_parser

ROOT = Path(__file__).resolve().parents[2]


def parse(text: str, tmp_path: Path, name: str = "run.log") -> tuple[list[dict], list[dict]]:
    log = tmp_path / name
    log.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [r for r in records if "metric" in r], [r for r in records if "finding" in r]


def test_empty_classes_in_a_coco_summary_are_nan_scores_without_a_finding(tmp_path: Path) -> None:
    # detectron2's `print_csv_format` lines; APs is nan when no small objects are annotated
    metrics, findings = parse(
        "[11/19 14:00:00 d2.evaluation.testing]: copypaste: Task: bbox\n"
        "[11/19 14:00:00 d2.evaluation.testing]: copypaste: AP,AP50,AP75,APs,APm,APl\n"
        "[11/19 14:00:00 d2.evaluation.testing]: copypaste: "
        "37.9312,58.5702,41.0841,nan,41.4359,49.1750\n",
        tmp_path,
    )
    values = {r["metric"]: r["value"] for r in metrics}
    assert values["val/map"] == 37.9312 and values["bbox/APs"] == "nan"
    assert findings == []


@pytest.mark.parametrize(
    "line",
    [
        "epoch=3 loss=0.5 auc=nan",
        "Epoch 3 | val_loss: 0.52 | val_auc: nan",
        "val_acc: nan",
        "mAP: nan",
    ],
)
def test_a_nan_score_is_no_nan_finding(line: str, tmp_path: Path) -> None:
    metrics, findings = parse(line + "\n", tmp_path)
    assert any(r["value"] == "nan" for r in metrics)
    assert findings == []


@pytest.mark.parametrize(
    "line",
    ["step 10 loss: nan", "epoch=3 loss=nan auc=0.7", "Epoch 3 | val_loss: nan | val_auc: 0.61"],
)
def test_a_nan_loss_still_is_one(line: str, tmp_path: Path) -> None:
    _, findings = parse(line + "\n", tmp_path)
    assert [f["finding"] for f in findings] == ["nan"]


def test_nanogpt_is_a_word(tmp_path: Path) -> None:
    metrics, findings = parse(
        "Training nanoGPT on shakespeare_char\nnanoGPT: 10.65M parameters\n", tmp_path
    )
    assert metrics == [] and findings == []
    assert scan_line("Training nanoGPT on shakespeare_char") is None


def test_a_nan_map_in_a_detr_record_is_a_value_not_a_finding() -> None:
    parser = make_parser("detr_json")
    metric = parser.feed(
        '{"train_lr": 0.0001, "train_loss": 7.3, '
        '"test_coco_eval_bbox": [NaN, 0.1, -1.0], "epoch": 3}'
    )
    assert metric is not None
    values = metric.as_dict()
    assert math.isnan(values["val/map"]) and values["val/map_50"] == 0.1
    assert findings_from_metric(metric) == []

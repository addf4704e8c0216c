"""`gpuherd parse` and the dashboard's task tracker judge the same real log the same way."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from gpuherd.tasks import TaskTracker
from gpuherd.tasks.health import judge
from parsers import vocabulary

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
# Nothing under make_logs/ (the generators, and the __pycache__ that running them leaves).
LOGS = sorted(
    p
    for p in DATA.rglob("*")
    if p.is_file() and "make_logs" not in p.parts and not p.name.endswith((".expected.json", ".md"))
)
WINDOWED = {"stalled", "chance", "zero_metric", "overfitting"}


@pytest.fixture(scope="module")
def parsed() -> dict[str, list[dict]]:
    """Every real log through one `gpuherd parse --json` process: records per file."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", *map(str, LOGS)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_file: dict[str, list[dict]] = defaultdict(list)
    for line in out.splitlines():
        record = json.loads(line)
        by_file[record["file"]].append(record)
    return by_file


def tracked(path: Path) -> TaskTracker:
    """The log read by the dashboard's tail collector and folded into a `TaskTracker`."""
    tracker = TaskTracker()
    collector = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0)
    collector.open()
    try:
        for _ in range(1000):
            batch = collector.sample()
            tracker.add_batch(batch)
            if (
                not batch.lines_read
                and not batch.metrics
                and batch.offset_bytes == (batch.size_bytes or 0)
            ):
                break
    finally:
        collector.close()
    return tracker


@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(DATA)))
def test_parse_and_the_dashboard_find_the_same(log: Path, parsed: dict[str, list[dict]]) -> None:
    records = [r for r in parsed[str(log)] if "finding" in r]
    view = tracked(log).view(str(log))
    assert view is not None
    windowed = sorted((r["finding"], r["evidence"]) for r in records if r["finding"] in WINDOWED)
    assert sorted((f.kind, f.evidence) for f in view.findings if f.kind in WINDOWED) == windowed
    assert {f.kind for f in view.findings} == {r["finding"] for r in records}


def test_the_real_logs_hold_windowed_findings(parsed: dict[str, list[dict]]) -> None:
    # without these the agreement above would hold trivially
    found = sorted(
        (Path(f).relative_to(DATA).as_posix(), r["line"], r["evidence"])
        for f, rs in parsed.items()
        for r in rs
        if r.get("finding") in WINDOWED
    )
    assert found == [
        # a hand-written loop whose validation accuracy stays at 0.0135 for 10 epochs while
        # its loss falls from 0.84 to 0.15: its accuracy is computed wrong, or the task is
        (
            "handloop/mri_unet.log",
            54,
            "val acc 0.0135 at step 10 stays near zero while training improves (class count "
            "unknown)",
        ),
        ("lightning_rich/h200_file.log", 26, "train acc 1 vs val acc 0.309 at step 5"),
        (
            "ultralytics_csv/results.csv",
            9,
            "val/map = 0 at all 8 evaluations while loss fell 9.658 -> 7.522",
        ),
        (
            "ultralytics_csv/results.csv",
            9,
            "val/map_50 = 0 at all 8 evaluations while loss fell 9.658 -> 7.522",
        ),
    ]


def test_yolo_loss_terms_are_summed_when_no_total_is_logged() -> None:
    box = [(e, 3.0 - 0.3 * e) for e in range(1, 9)]
    cls = [(e, 1.0 - 0.1 * e) for e in range(1, 9)]
    zero = [(e, 0.0) for e in range(1, 9)]
    found = judge({"train/box_loss": box, "train/cls_loss": cls, vocabulary.VAL_MAP: zero})
    assert [(name, f.kind, f.evidence) for name, f in found] == [
        ("val/map", "zero_metric", "val/map = 0 at all 8 evaluations while loss fell 3.4 -> 1")
    ]
    # a total, when logged, is what counts: here it does not fall
    flat = [(e, 2.0) for e in range(1, 9)]
    assert judge({"train/loss": flat, "train/box_loss": box, vocabulary.VAL_MAP: zero}) == []


@pytest.mark.parametrize(
    ("name", "kind", "split", "higher", "unit"),
    [
        ("train/loss", "loss", "train", False, ""),
        ("loss", "loss", None, False, ""),
        ("val/loss", "val_loss", "val", False, ""),
        ("train/box_loss", "loss", "train", False, ""),
        ("val/acc", "accuracy", "val", True, ""),
        ("val/acc_top5", "accuracy", "val", True, ""),
        ("val/map_50", "map", "val", True, ""),
        ("val/miou", "iou", "val", True, ""),
        ("throughput/tokens_s", "throughput", None, None, "tokens/s"),
        ("lr", "lr", None, None, ""),
        ("eta_s", "other", None, None, "s"),
        ("grad_norm", "other", None, None, ""),
    ],
)
def test_metric_vocabulary(
    name: str, kind: str, split: str | None, higher: bool | None, unit: str
) -> None:
    info = vocabulary.classify(name)
    assert (info.kind, info.split, info.higher_is_better, info.unit) == (kind, split, higher, unit)

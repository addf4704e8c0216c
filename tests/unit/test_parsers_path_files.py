"""Metric files named by their path: TensorBoard CSV exports and MLflow's file store."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from collectors.logs.logtail_digest import LineDigest
from collectors.logs.logtail_formats import RegistryFormats
from collectors.logs.logtail_lines import LineAssembler
from gpuherd.parse.parse_command import parse_file
from parsers.findings import findings_from_metric
from parsers.model import LogMetric
from parsers.path_formats import mlflow_metric_key, tensorboard_metric_name
from parsers.registry import detect_format, make_parser

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
TB = DATA / "tensorboard_csv"
MLRUNS = DATA / "mlflow" / "mlruns"
RUN = next(MLRUNS.glob("*/*/metrics")).parent
"""The one run the MLflow store holds (`make_logs/gen_mlflow.py`)."""


def _records(path: Path, forced: str | None = None) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    parse_file(str(path), forced, found.append)
    return found


def _metrics(path: Path) -> list[tuple[str, float, object]]:
    return [
        (str(r["metric"]), float(str(r["value"])), r.get("step"))
        for r in _records(path)
        if "metric" in r
    ]


@pytest.mark.parametrize(
    ("name", "metric"),
    [
        ("run-version_0-tag-train_loss.csv", "train/loss"),
        ("run-.-tag-Loss_train.csv", "train/loss"),  # `Loss/train` written `Loss_train`
        ("run-.-tag-Accuracy_valid.csv", "val/acc"),
        ("run-validation-tag-epoch_loss.csv", "val/loss"),  # Keras: the run is the split
        ("run-train-tag-epoch_accuracy.csv", "train/acc"),
        ("run-2024-05-01-tag-val_acc.csv", "val/acc"),  # `-` inside the run
        ("run-a-tag-b-tag-lr.csv", "lr"),  # the last `-tag-` splits
        ("run-.-tag-pred_age_loss.csv", "pred_age_loss"),  # unknown: its own name
        ("val_loss.csv", "val/loss"),  # renamed by hand: its stem
    ],
)
def test_a_tensorboard_export_is_named_from_its_file_name(name: str, metric: str) -> None:
    assert tensorboard_metric_name(f"/exports/{name}") == metric


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("mlruns/0/0123456789abcdef0123456789abcdef/metrics/train/loss", "train/loss"),
        (
            "/srv/mlruns/7/0123456789abcdef0123456789abcdef/metrics/eval/per class/iou: bg",
            "eval/per class/iou: bg",
        ),
        # a key holding `metrics`: the directory after the run id is the store's
        ("mlruns/1/0123456789abcdef0123456789abcdef/metrics/metrics/x", "metrics/x"),
        ("runs/a/metrics/b/metrics/c", "b/metrics/c"),  # no run id: the first `metrics`
        ("metrics/loss", "loss"),
        ("loss", None),
    ],
)
def test_an_mlflow_key_is_the_path_below_metrics(path: str, key: str | None) -> None:
    assert mlflow_metric_key(path) == key


def test_a_real_export_is_read_under_its_tag_with_wall_time_and_step() -> None:
    log = TB / "run-.-tag-loss.csv"
    first = _records(log)[0]
    assert first["format"] == "tensorboard_csv"
    assert (first["metric"], first["value"], first["step"]) == (
        "train/loss",
        2.8416740894317627,
        43,
    )
    assert first["taken_at"] == 1575618724.7046697


def test_a_resumed_run_keeps_both_stretches_in_file_order() -> None:
    steps = [step for _, _, step in _metrics(TB / "run-.-tag-loss.csv")]
    assert len(steps) == 149  # every row, none dropped or merged
    back = [i for i in range(1, len(steps)) if steps[i] < steps[i - 1]]
    assert back == [4, 72]  # as written: 95 then 68 (rows logged out of order), and the
    assert steps[71:74] == [2454, 41, 96]  # restart from a checkpoint, 2454 then 41


def test_the_header_decides_whatever_the_file_is_called(tmp_path: Path) -> None:
    renamed = tmp_path / "loss curve (download).csv"
    shutil.copy(TB / "run-.-tag-lr.csv", renamed)
    assert _records(renamed)[0]["format"] == "tensorboard_csv"
    assert (
        detect_format(["epoch,step,loss"], str(tmp_path / "run-x-tag-loss.csv"))
        != "tensorboard_csv"
    )


def test_an_empty_export_is_known_by_its_name_and_gives_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "run-.-tag-loss.csv"
    empty.write_bytes(b"")
    assert detect_format([], str(empty)) == "tensorboard_csv"
    assert _records(empty) == []


def test_a_garbage_row_is_one_unparsed_line_and_the_rest_is_kept() -> None:
    parser = make_parser("tensorboard_csv", path="run-.-tag-loss.csv")
    assert parser.feed("Wall time,Step,Value") is None
    for bad in ("garbage", "1,2", "1575618724.7,43,two", "1,2,3,4"):
        with pytest.raises(ValueError):
            parser.feed(bad)
    metric = parser.feed("1575618724.7,43,0.5")
    assert metric == LogMetric((("train/loss", 0.5),), 43, taken_at=1575618724.7)


def test_a_row_written_while_the_tail_reads_waits_for_its_newline() -> None:
    digest = LineDigest(RegistryFormats(), "/exports/run-.-tag-loss.csv")
    lines = LineAssembler()
    digest.add(lines.feed(b"Wall time,Step,Value\n1575618724.7,43,2.84\n1575618728.6,46,2.8"), None)
    digest.detect_if_due(force=True)  # the end of a read, as the tail ends each
    assert [m.values for _, m in digest.take().metrics] == [(("train/loss", 2.84),)]
    digest.add(lines.feed(b"406\n"), None)
    digest.detect_if_due(force=True)
    assert [m.values for _, m in digest.take().metrics] == [(("train/loss", 2.8406),)]


def test_mlflow_files_written_by_the_real_library_are_named_by_their_path() -> None:
    got = {
        key: _metrics(RUN / "metrics" / key)
        for key in ("train/loss", "lr", "val_acc", "eval/per class/iou: bg")
    }
    assert got["lr"][0] == ("lr", 0.1, 0)
    assert got["val_acc"] == [("val/acc", 0.5, 3)]
    assert got["eval/per class/iou: bg"] == [("eval/per class/iou: bg", 0.75, 3)]
    # resumed into the same run id from step 2: both stretches, in file order
    assert [step for _, _, step in got["train/loss"]] == [0, 1, 2, 3, 2, 3, 4]
    assert got["train/loss"][-1] == ("train/loss", 0.3, 4)
    first = _records(RUN / "metrics" / "train" / "loss")[0]
    assert first["format"] == "mlflow" and isinstance(first["taken_at"], float)
    assert first["taken_at"] > 1.7e9  # milliseconds read as seconds


def test_a_nan_metric_that_is_no_loss_raises_no_finding() -> None:
    records = _records(RUN / "metrics" / "eval" / "dice.tumor-core")
    assert [r["metric"] for r in records] == ["eval/dice.tumor-core"]
    assert records[0]["value"] == "nan"


def test_an_mlflow_nan_loss_is_a_nan_finding() -> None:
    parser = make_parser("mlflow", path="mlruns/0/0123456789abcdef0123456789abcdef/metrics/loss")
    metric = parser.feed("1795828416759 nan 7")
    assert metric is not None and math.isnan(metric.values[0][1])
    assert [f.kind for f in findings_from_metric(metric)] == ["nan"]


def test_an_mlflow_line_cut_short_or_garbage_is_unparsed_not_misread() -> None:
    parser = make_parser("mlflow", path="mlruns/0/0123456789abcdef0123456789abcdef/metrics/loss")
    assert parser.feed("1795828416759 2.0 0") is not None
    for bad in ("1795828416773 1.", "garbage", "1795828416773 one 1", "1 2 3 4", "1.5 2 3"):
        with pytest.raises(ValueError):
            parser.feed(bad)
    assert parser.feed("1795828416773 1.0 1") == LogMetric(
        (("train/loss", 1.0),), 1, taken_at=1795828416.773
    )


def test_an_mlflow_file_of_before_steps_is_read_without_them() -> None:
    parser = make_parser("mlflow", path="mlruns/0/0123456789abcdef0123456789abcdef/metrics/acc")
    assert parser.feed("1550000000000 0.5") == LogMetric(
        (("train/acc", 0.5),), None, taken_at=1550000000.0
    )


def test_mlflow_is_told_by_path_and_content(tmp_path: Path) -> None:
    store = tmp_path / "mlruns" / "0" / ("a" * 32) / "metrics"
    store.mkdir(parents=True)
    assert detect_format(["1795828416759 2.0 0"], str(store / "loss")) == "mlflow"
    assert detect_format([], str(store / "loss")) == "mlflow"  # nothing written yet
    # a last line still being written does not turn the file away
    assert detect_format(["1795828416759 2.0 0", "17958284"], str(store / "loss")) == "mlflow"
    # a log that happens to sit under a `metrics/` directory is not
    assert detect_format(["step 1 loss 0.5"], str(tmp_path / "metrics" / "train.log")) != "mlflow"
    assert detect_format([], str(tmp_path / "project" / "metrics" / "notes")) != "mlflow"
    # the same lines outside any `metrics/` directory are not
    assert detect_format(["1795828416759 2.0 0"], str(tmp_path / "loss")) != "mlflow"


def test_an_empty_mlflow_file_gives_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "mlruns" / "0" / ("b" * 32) / "metrics" / "loss"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    assert _records(empty) == []


def test_a_relative_path_inside_the_run_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(RUN / "metrics")
    records = _records(Path("train") / "loss")
    assert records[0]["metric"] == "train/loss" and records[0]["format"] == "mlflow"


def test_read_as_a_plain_csv_the_wall_clock_is_no_metric() -> None:
    parser = make_parser("csv")
    assert parser.feed("Wall time,Step,Value") is None
    assert parser.feed("1575618724.7,43,0.5") == LogMetric((("Value", 0.5),), 43)

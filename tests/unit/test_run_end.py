"""No false alarm at a good run's end: an ended run is never stalled; per-class NaN is no loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.logs.logtail_lines import read_lines
from collectors.samples import LogBatch
from gpuherd.parse.parse_command import parse_file
from gpuherd.tasks import TaskTracker
from gpuherd.tasks.health import judge
from parsers.findings import ends_run, findings_from_metric
from parsers.registry import make_parser
from tests.unit.test_task_writer_status import PID, lines_at, status_at
from tests.unit.test_tasks import TASK, batch, metric

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


@pytest.mark.parametrize(
    ("log", "line"),
    [
        ("lightning_rich/file.log", 18),  # `Trainer.fit` stopped: `max_epochs=3` reached.
        ("fairseq/roberta_race.log", 4),  # | done training in 249225.2 seconds
        ("handwritten/cifar10_tutorial.log", 15),  # Finished Training
        ("ultralytics/train.log", 59),  # 2 epochs completed in 0.000 hours.
        ("hf_trainer/seq_label.log", 20),  # {'train_runtime': 158.4339, ...}
    ],
)
def test_real_logs_say_where_their_run_ended_and_nowhere_else(log: str, line: int) -> None:
    with (DATA / log).open("rb") as handle:
        ends = [number for number, text in read_lines(handle) if ends_run(text)]
    assert ends == [line]


@pytest.mark.parametrize(
    "text",
    [
        "Training completed for epoch 3, starting evaluation",
        "Epoch 3: Training complete",
        "Training time per epoch: 3s",
        "Done! Now evaluating",
        "{'loss': 0.2, 'learning_rate': 1e-05, 'epoch': 1.0}",
        "step=5 train_loss=0.3",
    ],
)
def test_lines_of_a_run_going_on_do_not_end_it(text: str) -> None:
    assert not ends_run(text)


def _flat_end(drop: float) -> dict[str, list[tuple[float, float]]]:
    """Steps 0-199 at loss 1; the last quarter `drop` lower (relative)."""
    return {"train/loss": [(float(s), 1.0 if s < 150 else 1.0 - drop) for s in range(200)]}


@pytest.mark.parametrize(("drop", "stalled"), [(0.0099, True), (0.0101, False)])
def test_a_live_run_whose_loss_fell_less_than_one_percent_is_stalled(
    drop: float, stalled: bool
) -> None:
    kinds = [f.kind for _, f in judge(_flat_end(drop))]
    assert kinds == (["stalled"] if stalled else [])


@pytest.mark.parametrize("drop", [0.0, 0.0099, 0.0101])
def test_a_run_that_ended_is_never_stalled(drop: float) -> None:
    assert judge(_flat_end(drop), ended=True) == []


def _write_run(path: Path, end: str | None, after: str | None = None) -> Path:
    rows = [f"step={s} loss={1.0 if s < 150 else 0.995:.4f}" for s in range(200)]
    rows += [end] if end is not None else []
    rows += [after] if after is not None else []
    path.write_text("\n".join(rows) + "\n")
    return path


def _finding_kinds(path: Path) -> list[str]:
    found: list[dict[str, object]] = []
    parse_file(str(path), None, found.append)
    return [str(r["finding"]) for r in found if "finding" in r]


def test_parse_judges_a_flat_loss_as_finished_once_the_log_says_the_run_ended(
    tmp_path: Path,
) -> None:
    assert _finding_kinds(_write_run(tmp_path / "live.log", None)) == ["stalled"]
    assert _finding_kinds(_write_run(tmp_path / "done.log", "Training finished.")) == []
    # a metric after the end line: a second run in the same file goes on
    again = _write_run(tmp_path / "again.log", "Training finished.", "step=0 loss=0.9950")
    assert _finding_kinds(again) == ["stalled"]


def test_a_silent_live_writer_is_stalled_unless_its_log_said_the_run_ended() -> None:
    tracker = TaskTracker()
    lines_at(tracker, *[float(t) for t in range(10)])
    assert status_at(tracker, 9.0 + 30.1) == "stalled"
    # the end line comes after the last metric: saving or uploading, not stuck
    tracker.add_batch(batch(40.0, [], lines=1, run_end_line=11, modified_at=40.0))
    assert status_at(tracker, 40.0 + 29.9) == "running"
    assert status_at(tracker, 40.0 + 30.1) == "finished"
    assert status_at(tracker, 200.0) == "finished"
    # a later metric: the file goes on with a new run, whose silence is a stall again
    tracker.add_batch(
        LogBatch(
            TASK,
            201.0,
            "generic",
            ((12, metric(step=1, train__loss=1.0)),),
            lines_read=1,
            generation=1,
            modified_at=201.0,
        )
    )
    assert status_at(tracker, 201.0 + 30.1) == "stalled"


def test_an_end_line_beside_its_own_metric_ends_the_run() -> None:
    tracker = TaskTracker()
    lines_at(tracker, *[float(t) for t in range(10)])
    # the Trainer's `{'train_runtime': ...}` dict is a metric and the end line at once
    tracker.add_batch(batch(10.0, [metric(train__loss=0.5)], run_end_line=1, modified_at=10.0))
    assert status_at(tracker, 10.0 + 30.1) == "finished"


def _dashboard_kinds(tracker: TaskTracker) -> list[str]:
    view = tracker.view(TASK)
    assert view is not None
    return [f.kind for f in view.findings]


def test_the_dashboard_drops_stalled_once_the_run_ended() -> None:
    tracker = TaskTracker()
    for s in range(200):
        tracker.add_batch(batch(float(s), [metric(step=s, train__loss=1.0)], modified_at=s))
    tracker.writers_seen(TASK, 200.0, (PID,), (PID,))
    assert "stalled" in _dashboard_kinds(tracker)
    tracker.writers_seen(TASK, 201.0, (), ())  # the writer exited
    assert "stalled" not in _dashboard_kinds(tracker)


def test_the_dashboard_drops_stalled_when_the_command_exited() -> None:
    tracker = TaskTracker()
    for s in range(200):
        tracker.add_batch(batch(float(s), [metric(step=s, train__loss=1.0)]))
    assert "stalled" in _dashboard_kinds(tracker)
    tracker.ended(TASK, 0)
    assert "stalled" not in _dashboard_kinds(tracker)


def test_nan_in_a_per_class_list_is_no_nan_finding_but_a_nan_loss_is() -> None:
    assert _finding_kinds(DATA / "nnunet" / "spine_per_class_nan.log") == []
    assert _finding_kinds(DATA / "nnunet" / "nan_loss.log") == ["nan", "nan"]


@pytest.mark.parametrize(
    "line",
    [
        "dice [0.91, nan, 0.88]",
        "per-class IoU: [0.8, nan]",
        "epoch 3 loss 0.2 dice [0.91, nan, 0.88]",
        "step=5 loss=0.3 per-class IoU: [0.8, nan]",
        "2024-07-09 13:35:54.745506: Pseudo dice [nan, 0.0, 0.0]",
        '{"epoch": 1, "loss": 0.3, "dice_per_class": [0.91, NaN, 0.88]}',
    ],
)
def test_a_per_class_list_holding_nan_raises_no_finding(tmp_path: Path, line: str) -> None:
    log = tmp_path / "seg.log"
    log.write_text(line + "\n")
    assert _finding_kinds(log) == []


@pytest.mark.parametrize(
    "line",
    [
        "{'eval_loss': 0.3, 'eval_mean_iou': 0.41, 'eval_per_category_iou': [nan, 0.61, 0.2], "
        "'epoch': 1.0}",
        "{'eval_loss': 0.3, 'eval_mean_iou': 0.41, 'eval_per_category_iou': array([nan, 0.61]), "
        "'epoch': 1.0}",
    ],
)
def test_a_trainer_dict_keeps_its_values_beside_a_per_class_list(line: str) -> None:
    metric = make_parser("hf_trainer").feed(line)
    assert metric is not None
    assert metric.values == (("val/loss", 0.3), ("val/miou", 0.41)) and metric.epoch == 1.0
    assert findings_from_metric(metric) == []


def test_an_end_line_after_many_redraws_is_still_seen() -> None:
    bar = "Epoch 2: 100%|█| 16/16 [00:00<00:00, 308.83it/s, v_num=0, train_loss=0.464]"
    line = "\r".join([bar] * 10) + "\r`Trainer.fit` stopped: `max_epochs=3` reached."
    assert len(line) > 512 and ends_run(line)
    assert not ends_run("\r".join([bar] * 10))

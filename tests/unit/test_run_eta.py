"""A task's ETA is the run's: an inner bar (one epoch's batches, an evaluation) never gives it.

Real logs are read line by line as a tail reads them, each metric folded into a task, and the
task's ETA is looked at after every line: it may show only where the bar is the run's own
(a step bar over the whole run, or the last epoch's bar).
"""

from __future__ import annotations

import csv
import importlib.resources
from pathlib import Path

import pytest

from collectors.logs.logtail_lines import read_lines
from collectors.samples import LogBatch
from gpuherd.tasks import TaskTracker
from parsers.registry import detect_format, make_parser

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def etas_by_epoch(relative: str) -> tuple[str, dict[float | None, set[bool]]]:
    """The log's format, and per epoch of the task whether its ETA was shown after each line."""
    path = LOGS / relative
    with path.open("rb") as handle:  # detected from its first lines, as a tail detects it
        first = [line for _, (_, line) in zip(range(200), read_lines(handle), strict=False)]
    log_format = detect_format(first, str(path))
    parser = make_parser(log_format, path=str(path))
    tracker = TaskTracker()
    shown: dict[float | None, set[bool]] = {}
    with path.open("rb") as handle:
        for number, line in read_lines(handle):
            try:
                metric = parser.feed(line)
            except ValueError:
                continue
            if metric is None:
                continue
            # one line a tenth of a second: every value is fresh when the view is taken
            tracker.add_batch(
                LogBatch(str(path), number / 10, log_format, ((number, metric),), (), lines_read=1)
            )
            view = tracker.view(str(path))
            assert view is not None
            shown.setdefault(view.epoch, set()).add(view.eta_s is not None)
    return log_format, shown


@pytest.mark.parametrize(
    "relative",
    [
        "tqdm/lightning_file.log",
        "tqdm/lightning_tty.log",
        "tqdm/tqdm_file.log",
        "tqdm/tqdm_tty.log",
        "yolov5/train.log",
        "keras/verbose1_tty.log",
        "keras2/lr_scheduler.log",
    ],
)
def test_an_epochs_bar_never_gives_the_run_an_eta(relative: str) -> None:
    # `Epoch 0:  50%|...| 8/16 [00:01<00:01, ...]`: the time left is the epoch's, and these bars
    # never say how many epochs the run has; YOLO's row bars count one epoch's batches; Keras'
    # logs kept each epoch's last frame, whose time column is the epoch's duration
    _, shown = etas_by_epoch(relative)
    assert len(shown) >= 1 and all(seen == {False} for seen in shown.values()), shown


def test_lightnings_rich_bar_gives_the_eta_in_the_last_epoch_only() -> None:
    # `Epoch 0/2 ... 0:00:01 • 0:00:01`: Lightning counts from 0 and prints max_epochs - 1
    log_format, shown = etas_by_epoch("lightning_rich/tty.log")
    assert log_format == "lightning_rich"
    assert shown[0.0] == {False} and shown[1.0] == {False}
    assert True in shown[2.0]


def test_the_trainers_step_bar_is_the_runs_and_gives_its_eta() -> None:
    # the Trainer's bar counts the whole run's steps (`12/60 [00:03<00:12, 3.9it/s]`)
    _, shown = etas_by_epoch("hf_trainer/with_tqdm.log")
    assert any(True in seen for seen in shown.values()), shown


def keras_eta(lines: list[str]) -> float | None:
    tracker = TaskTracker()
    parser = make_parser("keras")
    for number, line in enumerate(lines, 1):
        metric = parser.feed(line)
        if metric is not None:
            tracker.add_batch(
                LogBatch("fit.log", number / 10, "keras", ((number, metric),), (), lines_read=1)
            )
    view = tracker.view("fit.log")
    return None if view is None else view.eta_s


@pytest.mark.parametrize(
    ("epoch", "eta"),
    [("Epoch 1/2", None), ("Epoch 2/2", 7.0), ("Epoch 2/3", None), ("Epoch 1/1", 7.0)],
)
def test_a_keras_epochs_time_left_is_the_runs_eta_in_its_last_epoch_only(
    epoch: str, eta: float | None
) -> None:
    # Keras' mid-epoch frame: `5/12 ━━━━━━━━━━━━━━━━━━━━ 7s 1s/step - loss: 0.5` (7 s left)
    assert keras_eta([epoch, "5/12 ━━━━━━━━━━━━━━━━━━━━ 7s 1s/step - loss: 0.5000"]) == eta


def test_the_demo_never_shows_an_epochs_time_left_as_the_runs_eta() -> None:
    # The demo's command is Lightning's TQDM bar (`Epoch 1: 40%|...`): at epoch 1 of 8 it once
    # showed `ETA 0:00`, the end of the epoch's validation bar.
    demo = importlib.resources.files("gpuherd").joinpath("data/demo")
    with demo.joinpath("metrics.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["task"] == "command"]
    assert rows and {row["metric"] for row in rows} >= {"train/loss", "throughput/it_s"}
    assert "eta_s" not in {row["metric"] for row in rows}

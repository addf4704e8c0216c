"""YOLOv5, Megatron / DeepSpeed and Keras 2 consoles, read from public logs line by line.

Each log is a verbatim excerpt under tests/data/logs (see its README for the repository, path
and commit); the expected numbers are read off the lines themselves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.parse_command import iter_lines
from parsers.model import LogMetric
from parsers.registry import detect_format, make_parser

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def lines(name: str) -> list[str]:
    with (LOGS / name).open("rb") as handle:
        return list(iter_lines(handle))


def parse(name: str) -> tuple[str, dict[int, LogMetric]]:
    text = lines(name)
    log_format = detect_format(text[:200], name)
    parser = make_parser(log_format)
    found = {}
    for number, line in enumerate(text, 1):
        metric = parser.feed(line)
        if metric is not None:
            found[number] = metric
    return log_format, found


def test_yolov5_epoch_rows_and_the_validation_all_row() -> None:
    # Before, the `gpu_mem box obj cls` table and the `mAP@.5:.95` header were unknown:
    # the log read as bare tqdm bars (a throughput, no loss and no mAP).
    log_format, found = parse("yolov5/train.log")
    assert log_format == "ultralytics"
    # `1/299  4.89G  0.0479  0.03484  0  1  1280: 100%|...| 213/213 [06:11<00:00,  1.74s/it]`
    row = found[14]
    assert row.epoch == 1
    assert dict(row.values) == {
        "gpu_mem_gb": 4.89, "train/box_loss": 0.0479, "train/obj_loss": 0.03484,
        "train/cls_loss": 0.0, "throughput/it_s": pytest.approx(1 / 1.74), "eta_s": 0.0}
    val = found[16]  # `all  677  2449  0.0682  0.126  0.0251  0.00763`
    assert val.epoch == 1
    assert val.values == (("val/precision", 0.0682), ("val/recall", 0.126),
                          ("val/map_50", 0.0251), ("val/map", 0.00763))
    assert found[9].epoch == 0  # YOLOv5 counts epochs from 0, as it prints them
    assert sorted(found) == [9, 11, 14, 16, 19, 21, 24, 26]


def test_megatron_iteration_line_e_notation_and_time_per_iteration() -> None:
    log_format, found = parse("megatron/gpt2_base_n4.log")
    assert log_format == "megatron"
    first = found[1]
    assert first.step == 60
    assert dict(first.values) == {
        "lr": 1.494e-04, "train/loss": 8.394111, "grad_norm": 5.275,
        "skipped_iterations": 0.0, "nan_iterations": 0.0,
        "throughput/it_s": pytest.approx(1000 / 1378.0),
        "throughput/samples_s": pytest.approx(4 * 1000 / 1378.0)}
    # `time (ms) | forward-compute: 175.85 | ...` lines are timers, not metrics
    assert 2 not in found
    # ` validation loss at iteration 100 | lm loss value: 8.017406E+00 | lm loss PPL: 3.033300E+03`
    val = found[12]
    assert val.step == 100
    assert val.values == (("val/loss", 8.017406), ("val/perplexity", 3033.3))
    assert found[35].values == (("val/loss", 7.487306), ("val/perplexity", 1785.236))


def test_megatron_deepspeed_lm_loss_with_a_hyphen() -> None:
    log_format, found = parse("megatron/ds_3d_on.log")
    assert log_format == "megatron"
    assert 1 not in found  # `[Rank 59] (after 1 iterations) memory (MB) | ...`
    assert found[4].step == 3
    assert dict(found[4].values)["train/loss"] == 41.03157
    assert dict(found[4].values)["throughput/samples_s"] == pytest.approx(1024 * 1000 / 137138.4)


def test_deepspeed_log_dist_step_line() -> None:
    log_format, found = parse("megatron/log_dist.log")
    assert log_format == "megatron"
    assert sorted(found) == [11]
    # `[2021-06-10 20:47:51,885] ... [Rank 0] step=0, skipped=0, lr=[0.0, 0.0], ...`
    metric = found[11]
    assert metric.step == 0 and metric.values == (("lr", 0.0),)
    assert metric.taken_at == 1623358071.0


def test_deepspeed_step_and_timer_lines() -> None:
    # Two consecutive lines of a public DeepSpeed-Chat log (the search corpus did not name
    # its repository): two parameter groups, and the throughput timer.
    parser = make_parser("megatron")
    step = parser.feed(
        "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=4, "
        "lr=[4.99804827338393e-05, 4.99804827338393e-05], mom=[(0.9, 0.95), (0.9, 0.95)]")
    assert step is not None and step.step == 10
    assert step.values == (("lr", 4.99804827338393e-05),)
    timer = parser.feed(
        "[2023-11-07 01:55:23,714] [INFO] [timer.py:260:stop] epoch=0/micro_step=40/"
        "global_step=10, RunningAvgSamplesPerSec=25.025771473496132, CurrSamplesPerSec="
        "25.704280480541442, MemAllocated=4.32GB, MaxMemAllocated=38.49GB")
    assert timer is not None and timer.step == 10
    assert timer.values == (("throughput/samples_s", 25.704280480541442),)
    assert timer.taken_at == 1699322123.0
    # DeepSpeed before 0.7.3 wrote `epoch/step` alone
    older = parser.feed(
        "[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec="
        "232.7340551694273, CurrSamplesPerSec=227.48090316379353, MemAllocated=0.36GB, "
        "MaxMemAllocated=15.06GB")
    assert older is not None and older.step == 20
    assert older.values == (("throughput/samples_s", 227.48090316379353),)


def test_megatron_lines_that_are_not_iteration_lines() -> None:
    parser = make_parser("megatron")
    assert parser.feed("setting validation data start iteration to 0") is None
    assert parser.feed("[after megatron is initialized] iteration 5/ 10 | lm loss: 1.0") is None
    with pytest.raises(ValueError):
        parser.feed(" iteration       10/    1000 | lm loss: tensor(1.0) |")


def test_keras2_counting_samples_gives_samples_per_second_and_the_scheduler_lr() -> None:
    # `Train on 60000 samples` then `60000/60000 [===] - 12s 195us/step`: the time is per
    # sample. Before, the rate was `throughput/it_s` and the scheduler's lr was dropped.
    log_format, found = parse("keras2/lr_scheduler.log")
    assert log_format == "keras"
    # `Epoch 00001: LearningRateScheduler setting learning rate to 0.003.`
    assert found[4].values == (("lr", 0.003),)
    assert found[4].epoch == 1
    assert dict(found[5].values) == {
        "throughput/samples_s": pytest.approx(1 / 195e-6), "train/loss": 0.2537,
        "train/acc": 0.9194, "val/loss": 0.0578, "val/acc": 0.9816}
    assert found[5].epoch == 1
    assert found[8].values == (("lr", 0.0022744503),)
    assert found[9].epoch == 2


def test_keras2_per_sample_unit() -> None:
    # TensorFlow 2.0 and 2.1 write `us/sample` (a line of a public notebook export; the search
    # corpus did not name its repository)
    parser = make_parser("keras")
    assert parser.feed("Epoch 3/3") is None
    metric = parser.feed(
        "38400/38400 [==============================] - 9s 247us/sample - "
        "loss: 0.7983 - accuracy: 0.7527 - val_loss: 0.8466 - val_accuracy: 0.7380")
    assert metric is not None and metric.epoch == 3
    assert dict(metric.values) == {
        "throughput/samples_s": pytest.approx(1 / 247e-6), "train/loss": 0.7983,
        "train/acc": 0.7527, "val/loss": 0.8466, "val/acc": 0.7380}
    # a batch-counting Keras (TensorFlow 2.2 and later) keeps steps per second
    parser.reset()
    metric = parser.feed("1875/1875 [==============================] - 3s 2ms/step - loss: 0.2")
    assert metric is not None and dict(metric.values)["throughput/it_s"] == 500.0

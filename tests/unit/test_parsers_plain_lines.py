"""Lines people print by hand: in a console format's log, and in the shapes loops print them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from gpuherd.cli import main
from parsers.model import LogMetric
from parsers.registry import PLAIN_LINE_FORMATS, detect_format, make_parser

# A tqdm bar as tqdm 4 writes it to a file, then a script's own prints between epochs.
TQDM_LOG = (
    "train:  45%|████▌     | 45/100 [00:01<00:01, 40.00it/s, loss=0.5]\n"
    "step=45 loss=nan\n"
    "val_acc=0.83\n"
    "train: 100%|██████████| 100/100 [00:02<00:00, 41.00it/s, loss=0.4]\n"
)


def test_a_tqdm_log_still_reads_the_scripts_own_lines() -> None:
    lines = TQDM_LOG.splitlines()
    assert detect_format(lines) == "tqdm"
    parser = make_parser("tqdm")
    metrics = [parser.feed(line) for line in lines]
    assert metrics[0] == LogMetric(
        (("throughput/it_s", 40.0), ("eta_s", 1.0), ("train/loss", 0.5)), 45
    )
    nan = metrics[1]
    assert nan is not None and nan.step == 45 and math.isnan(nan.as_dict()["train/loss"])
    assert metrics[2] == LogMetric((("val/acc", 0.83),))


def test_gpuherd_parse_gives_the_nan_finding_and_the_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "train.log"
    log.write_text(TQDM_LOG)
    assert main(["parse", "--json", str(log)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["format"] for r in records if "metric" in r} == {"tqdm"}
    assert [(r["line"], r["finding"]) for r in records if "finding" in r] == [(2, "nan")]
    assert [(r["line"], r["value"]) for r in records if r.get("metric") == "val/acc"] == [(3, 0.83)]


def test_a_forced_format_reads_the_plain_lines_as_the_detected_one_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Forcing the format detection picks changes nothing, in `parse` as in a tail: the
    # `loss=nan` of line 2 is still a NaN finding.
    log = tmp_path / "train.log"
    log.write_text(TQDM_LOG)
    assert main(["parse", "--json", str(log)]) == 0
    detected = capsys.readouterr().out
    assert main(["parse", "--json", "--format", "tqdm", str(log)]) == 0
    assert capsys.readouterr().out == detected
    records = [json.loads(line) for line in detected.splitlines()]
    assert sorted({r["line"] for r in records}) == [1, 2, 3, 4]


def test_the_live_tail_gives_them_too(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(TQDM_LOG)
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    try:
        tail.wake()
        batch = tail.sample()
    finally:
        tail.close()
    assert batch.format == "tqdm"
    assert [(n, f.kind) for n, f in batch.findings] == [(2, "nan")]
    assert [(n, m.values) for n, m in batch.metrics if n == 3] == [(3, (("val/acc", 0.83),))]


@pytest.mark.parametrize("name", sorted(PLAIN_LINE_FORMATS))
def test_every_console_format_with_plain_lines_reads_them(name: str) -> None:
    parser = make_parser(name)
    metric = parser.feed("step=45 loss=nan")
    assert metric is not None and metric.step == 45
    assert parser.feed("val_acc=0.83") == LogMetric((("val/acc", 0.83),))


@pytest.mark.parametrize("name", ["mmengine", "detectron2"])
def test_framework_loggers_keep_their_config_dumps_out(name: str) -> None:
    # mmengine opens its log with the environment (`    seed: 0`, `  - C++ Version: 202002`)
    assert make_parser(name).feed("    seed: 0") is None


def test_a_declined_progress_bar_is_no_metric_line() -> None:
    # a `datasets` map bar: its percentage is no mAP
    parser = make_parser("tqdm")
    assert parser.feed("Map: 100%|██████████| 500/500 [00:00<00:00, 9.8 examples/s]") is None


M = LogMetric


@pytest.mark.parametrize(
    ("line", "metric"),
    [
        # values followed by a comma were "not a number: '200,'"
        ("Step: 200, Loss: 2.1", M((("train/loss", 2.1),), 200)),
        (
            "epoch: 2, step: 500, train_loss: 1.7, val_loss: 1.8",
            M((("train/loss", 1.7), ("val/loss", 1.8)), 500, 2.0),
        ),
        # `key value` without `:` or `=`
        ("step 100 | loss 2.31 | lr 3e-4", M((("train/loss", 2.31), ("lr", 3e-4)), 100)),
        ("it 400 loss 1.8", M((("train/loss", 1.8),), 400)),
        (
            "Epoch 2: train loss 1.6, val loss 1.7",
            M((("train/loss", 1.6), ("val/loss", 1.7)), None, 2.0),
        ),
        # counters in brackets: as printed, the step within the epoch
        ("Epoch [1/3], Step [100/600], Loss: 0.2345", M((("train/loss", 0.2345),), 100, 1.0)),
        ("[1,  2000] loss: 1.925", M((("train/loss", 1.925),), 2000, 1.0)),
        # PyTorch's MNIST example: the test set is its validation
        (
            "Test set: Average loss: 0.1000, Accuracy: 9820/10000 (98%)",
            M((("val/loss", 0.1), ("val/acc", 0.982))),
        ),
        # PyTorch's word_language_model example
        (
            "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.68 | loss  7.63 "
            "| ppl  2050.44",
            M(
                (
                    ("lr", 20.0),
                    ("throughput/it_s", 1000 / 45.68),
                    ("train/loss", 7.63),
                    ("train/ppl", 2050.44),
                ),
                200,
                1.0,
            ),
        ),
        (
            "| end of epoch   1 | time: 891.63s | valid loss  5.56 | valid ppl   259.02",
            M((("val/loss", 5.56), ("val/ppl", 259.02)), None, 1.0),
        ),
        (
            "| End of training | test loss  5.24 | test ppl   189.51",
            M((("test/loss", 5.24), ("test/ppl", 189.51))),
        ),
        # custom segmentation trainers (HRNet's lineage)
        (
            "Epoch: [1/237] Iter:[0/35], Time: 14.10, lr: [0.004981008646248387], Loss: 0.644617, "
            "Acc:0.942246, Semantic loss: 0.410618, BCE loss: 0.055437, SB loss: 0.178562",
            M(
                (
                    ("Time", 14.1),
                    ("lr", 0.004981008646248387),
                    ("train/loss", 0.644617),
                    ("train/acc", 0.942246),
                    ("Semantic_loss", 0.410618),
                    ("BCE_loss", 0.055437),
                    ("SB_loss", 0.178562),
                ),
                0,
                1.0,
            ),
        ),
        (
            "Loss: 4.592, MeanIU:  0.4315, Best_mIoU:  0.4315",
            M((("val/loss", 4.592), ("val/miou", 0.4315), ("Best_mIoU", 0.4315))),
        ),
        (
            "MeanIU:  0.2349, Pixel_Acc:  0.7683, Mean_Acc:  0.3437, Class IoU: [...]",
            M((("val/miou", 0.2349), ("val/pixel_acc", 0.7683), ("Mean_Acc", 0.3437))),
        ),
        (
            "aAcc: 0.9360 mIoU: 0.8782 mAcc: 0.9340",
            M((("val/pixel_acc", 0.936), ("val/miou", 0.8782), ("mAcc", 0.934))),
        ),
        # `ep, batch, loss` loops
        ("ep 3, batch 120, loss 0.4213", M((("train/loss", 0.4213),), 120, 3.0)),
        ("ep: 3, batch: 120, loss: 0.4213", M((("train/loss", 0.4213),), 120, 3.0)),
        ("ep: [3/100], batch: [120/500], loss: 0.4213", M((("train/loss", 0.4213),), 120, 3.0)),
    ],
)
def test_hand_written_lines(line: str, metric: LogMetric) -> None:
    got = make_parser("generic").feed(line)
    assert repr(got) == repr(metric)


@pytest.mark.parametrize(
    "line",
    [
        "Loaded 5 files in 2 seconds",
        "Using batch 32 and lr 0.1 for the run",
        "The loss 0.5 is lower than the best loss 0.6 so we keep training on",
        "Epoch 1/3",
        "epoch 12:30 loss",
        "| Generated 100/1000 words",
    ],
)
def test_prose_with_numbers_is_no_metric_line(line: str) -> None:
    assert make_parser("generic").feed(line) is None


def test_a_number_with_misplaced_commas_is_still_an_unparsed_line() -> None:
    with pytest.raises(ValueError, match="not a number: '1,0,696'"):
        make_parser("generic").feed("step=15 loss=1,0,696 lr=0.05")


def test_a_console_logs_other_lines_are_read_only_when_they_name_a_known_metric() -> None:
    parser = make_parser("tqdm")
    assert parser.feed("numpy_random_seed: 0") is None  # a setting, no metric word
    assert parser.feed("INFO acc2=0.5") is None  # an unknown key among words: prose
    # the same shape with a known key: a shape that gave nothing is remembered with the
    # digits its words hold, so `acc1` is not taken for `acc2`
    assert parser.feed("INFO acc1=0.5") == LogMetric((("train/acc", 0.5),))
    long = "step=1 loss=0.5 " + "x" * 600  # a dump, not a metric line
    assert parser.feed(long) is None
    assert make_parser("generic").feed(long) == LogMetric((("train/loss", 0.5),), 1)


def test_key_value_lines_of_one_shape_read_alike() -> None:
    # the second line of a shape is read by the first one's recipe
    parser = make_parser("generic")
    lines = [
        f"| epoch {e:3d} | {b:5d}/ 2983 batches | lr 20.00 | ms/batch {ms:5.2f} | "
        f"loss {loss:5.2f} | ppl {ppl:8.2f}"
        for e, b, ms, loss, ppl in (
            (1, 200, 45.68, 7.63, 2050.44),
            (2, 400, 50.00, 6.85, 945.93),
            (3, 600, 0.0, 6.48, 653.61),
        )
    ]
    metrics = [parser.feed(line) for line in lines]
    assert metrics[1] == LogMetric(
        (("lr", 20.0), ("throughput/it_s", 20.0), ("train/loss", 6.85), ("train/ppl", 945.93)),
        400,
        2.0,
    )
    # `ms/batch 0.00`: too fast to time, no rate
    assert metrics[2] == LogMetric(
        (("lr", 20.0), ("train/loss", 6.48), ("train/ppl", 653.61)), 600, 3.0
    )

"""The generic reader on records of frameworks it has no parser for: structure, not names.

Lines here show the shapes such logs print (separators, step anchors, units, short names,
epoch blocks); the real logs are under tests/data/logs, read by eye in `hand_read_unseen.py`.
"""

from __future__ import annotations

import math

import pytest

from parsers.findings import findings_from_metric
from parsers.generic_context import CONTEXT_LINES, GenericParser
from parsers.keyvalue import parse_generic_line, parse_without_plans
from parsers.model import LogMetric
from parsers.records import parse_record_line
from parsers.registry import detect_format, make_parser
from tests.unit.hand_read_unseen import BLIND, UNSEEN
from tests.unit.test_parsers_golden import DATA, _sample, parse_whole


def read(line: str) -> tuple[dict[str, float], int | None, float | None] | None:
    metric = parse_generic_line(line)
    return None if metric is None else (dict(metric.values), metric.step, metric.epoch)


@pytest.mark.parametrize(
    ("line", "values", "step", "epoch"),
    [
        (
            "step 200 | epoch 0 | loss 2.3100 | grad_norm 0.91 | lr 3.0e-04",
            {"train/loss": 2.31, "grad_norm": 0.91, "lr": 3e-4},
            200,
            0.0,
        ),
        (
            "Step 1000/ 2000; acc: 41.20; ppl: 18.31; xent: 2.91; lr: 0.00050; 12000/11000 tok/s;",
            {
                "train/acc": 41.2,
                "train/ppl": 18.31,
                "train/loss": 2.91,
                "lr": 0.0005,
                "throughput/tokens_s": 11000.0,
            },
            1000,
            None,
        ),
        (
            "Ep. 3 : Up. 6500 : Sen. 1,024 : Cost 2.91 * 80,000 after 900,000 : Time 40.1s : "
            "812.5 words/s",
            {"train/loss": 2.91, "time_ms": 40100.0, "throughput/tokens_s": 812.5},
            6500,
            3.0,
        ),
        (
            "[120]\tvalid_0's auc: 0.8123\tvalid_0's binary_logloss: 0.4471",
            {"val/auc": 0.8123, "val/binary_logloss": 0.4471},
            120,
            None,
        ),
        (
            "[12]    train-rmse:0.41232  eval-rmse:0.45511",
            {"train/rmse": 0.41232, "val/rmse": 0.45511},
            12,
            None,
        ),
        (
            "Epoch   4, Step:     300, Batch Loss:     1.92, Tokens per Sec:   3100, Lr: 0.000200",
            {"train/loss": 1.92, "throughput/tokens_s": 3100.0, "lr": 0.0002},
            300,
            4.0,
        ),
        (
            "s:400 trl:2.31 tel:2.45 lr:3e-4",
            {"train/loss": 2.31, "val/loss": 2.45, "lr": 3e-4},
            400,
            None,
        ),
        (
            "iteration 40/99 | loss 2.1 | 14ms/step",
            {"train/loss": 2.1, "step_time_ms": 14.0},
            40,
            None,
        ),
        (
            "step:125/1770 val_loss:4.2640 train_time:120000ms step_avg:42.13ms",
            {"val/loss": 4.264, "train_time_ms": 120000.0, "step_time_ms": 42.13},
            125,
            None,
        ),
        (
            "step 10 | loss 3.2 | dt 512.3ms | mfu 41.2% | tok/s 2.5e+4",
            {"train/loss": 3.2, "step_time_ms": 512.3, "throughput/tokens_s": 25000.0},
            10,
            None,
        ),
        (
            "step 5 | loss 2.0 | norm 1.2 | sps 120.5",
            {"train/loss": 2.0, "grad_norm": 1.2, "throughput/samples_s": 120.5},
            5,
            None,
        ),
        ("Epoch 3: 'val_loss' reached 0.0573 (best 0.0573)", {"val/loss": 0.0573}, None, 3.0),
        (
            "Best validation result (greedy) at step 5000: 21.3 bleu",
            {"best/bleu": 21.3},
            5000,
            None,
        ),
        (
            "[2022-12-14 14:42:05] [valid] Ep. 62 : Up. 20000 : cross-entropy : 0.243329 "
            ": new best",
            {"val/loss": 0.243329},
            20000,
            62.0,
        ),
        (
            "2022-02-26 16:56:08,125 - INFO - joeynmt.training - Validation result (greedy) "
            "at epoch"
            "   1, step     1160: bleu:   0.00, loss: 3581.4941, ppl:   1.3005",
            {"val/bleu": 0.0, "val/loss": 3581.4941, "val/ppl": 1.3005},
            1160,
            1.0,
        ),
        (
            "[run] Epoch 0.0509: train_loss/word=8.596564 (steps=23, words/sec=5060.50)",
            {"train/loss": 8.596564, "throughput/tokens_s": 5060.5},
            23,
            0.0509,
        ),
        (
            "[run]              dev auxiliary Loss: 5.904 (ref_len=6809)",
            {"val/loss": 5.904},
            None,
            None,
        ),
        (
            "[2024-01-09 16:25:21,858 INFO] Validation perplexity: 1605.39",
            {"val/ppl": 1605.39},
            None,
            None,
        ),
    ],
)
def test_a_record_is_read_by_its_structure(
    line: str, values: dict[str, float], step: int | None, epoch: float | None
) -> None:
    assert read(line) == (values, step, epoch)


@pytest.mark.parametrize(
    "line",
    [
        "  (0): Linear(in_features=512, out_features=512, bias=True)",
        "        (dropout): Dropout(p=0.1, inplace=False)",
        "Saving the model with val_loss=0.123 to /ckpt after epoch 3 because it improved",
        "The loss 0.5 is lower than the best loss 0.6 so we keep training on",
        "train.py:12: UserWarning: Ep. 3 : Up. 500 : Cost 2.1 : L.r. 0.1",
        "[2018-12-08 17:18:32] [config] valid-freq: 5000",
        "Number of words:  2430",
        "peak memory allocated: 57397 MiB reserved: 61912 MiB",
    ],
)
def test_printouts_prose_warnings_and_bars_are_no_records(line: str) -> None:
    assert parse_generic_line(line) is None


def test_placeholders_are_left_out() -> None:
    # nanoGPT's mfu before its first estimate, and a step time before any step was timed
    assert read("iter 0: loss 4.1, time 1210.2ms, mfu -100.00%") == ({"train/loss": 4.1}, 0, None)
    assert read("step:1/6000 train_loss:11.0091 train_time:24179ms step_avg:nanms") == (
        {"train/loss": 11.0091},
        1,
        None,
    )  # the record reads no more than the pairs: theirs
    assert read("iter_dt 0.00ms; iter 0: train loss 10.87835") == (
        {"train/loss": 10.87835},
        0,
        None,
    )
    # a unit with a value that is there is read: just past the placeholder
    assert read("iter_dt 0.01ms; iter 1: train loss 10.8") == (
        {"step_time_ms": 0.01, "train/loss": 10.8},
        1,
        None,
    )


def test_a_unit_belongs_to_its_own_field() -> None:
    # `40.1s` is the time's, never the words a second after it
    values, _, _ = read("Ep. 3 : Up. 6500 : Cost 2.91 : Time 40.1s : 812.5 words/s") or ({}, 0, 0)
    assert values["time_ms"] == 40100.0 and values["throughput/tokens_s"] == 812.5


def test_a_record_and_its_plan_agree() -> None:
    line = "[2022-12-14 14:41:34] Ep. 62 : Up. 20000 : Cost 0.0638 : 8082.72 words/s"
    for _ in range(3):  # the second sighting makes a plan of the key-value reading
        assert repr(parse_generic_line(line)) == repr(parse_without_plans(line))


def test_a_shape_that_gave_no_record_gives_none_again() -> None:
    prose = "Loaded 12 files into 3 buckets; skipped 4 of them in 2 passes"
    assert parse_record_line(prose) is None
    assert parse_record_line(prose.replace("12", "13")) is None


def feed_all(lines: list[str]) -> list[LogMetric | None]:
    parser = GenericParser()
    return [parser.feed(line) for line in lines]


def test_a_validation_line_takes_the_epoch_of_its_block() -> None:
    got = feed_all(
        [
            "Epoch 12 - |param|=6.0e+02 loss=4.92e+00 ppl=137.87",
            "Validation - loss=4.0864e+00 ppl=59.52 best_loss=inf",
        ]
    )
    assert got[1] is not None and got[1].epoch == 12.0
    assert dict(got[1].values)["val/loss"] == 4.0864


def test_an_epoch_heading_dates_the_validation_lines_below_it() -> None:
    got = feed_all(["===== Epoch 3 =====", "val_loss: 0.49", "train_loss: 0.53"])
    assert got[1] is not None and got[1].epoch == 3.0
    # a training line keeps its own counters (none here): it is not dated by the block
    assert got[2] is not None and got[2].epoch is None


def test_the_epoch_block_ends_after_its_lines() -> None:
    lines = ["Epoch 3 - loss=0.5", *["some prose line"] * (CONTEXT_LINES - 1), "val_loss: 0.4"]
    assert feed_all(lines)[-1].epoch == 3.0  # type: ignore[union-attr]
    lines.insert(1, "one more prose line")
    assert feed_all(lines)[-1].epoch is None  # type: ignore[union-attr]


def test_settings_before_the_first_step_are_no_metrics() -> None:
    got = feed_all(
        ["lr: 0.0006", "epochs : 10", "eps: 1e-08", "loss: 2.5", "step 1 | loss 2.4", "lr: 0.0005"]
    )
    assert got[:3] == [None, None, None]
    assert got[3] is not None  # a measured value, even before the first step
    assert got[5] is not None and dict(got[5].values) == {"lr": 0.0005}  # the run has begun


def test_a_setting_that_is_not_a_number_is_still_a_bad_line() -> None:
    with pytest.raises(ValueError):
        make_parser("generic").feed("lr=inf")


def test_a_best_so_far_placeholder_is_no_inf_loss() -> None:
    metric = LogMetric((("val/loss", 4.08), ("best_loss", math.inf)), None, 1.0)
    assert findings_from_metric(metric) == []
    assert [
        f.kind for f in findings_from_metric(LogMetric((("val/loss", math.inf),), None, 1.0))
    ] == ["inf"]


def test_nan_in_a_per_class_list_is_no_nan_loss() -> None:
    parser = make_parser("generic")
    metric = parser.feed("Epoch 3 | val_loss: 0.21 | dice: [0.91, nan, 0.88]")
    assert metric is not None and findings_from_metric(metric) == []


def recall(keys: list[str]) -> float:
    found = total = 0
    for key in keys:
        log = DATA / key
        result = parse_whole(log, detect_format(_sample(log), str(log)))
        for reading in UNSEEN[key].values:
            total += 1
            found += any(
                record["line"] == reading.line
                and any(
                    name == reading.name and math.isclose(float(value), reading.value, rel_tol=1e-9)
                    for name, value in record["values"]
                )
                and (reading.step is None or record.get("step") == reading.step)
                and (reading.epoch is None or record.get("epoch") == reading.epoch)
                for record in result["metrics"]
            )
    return found / total


def test_recall_on_logs_of_frameworks_without_a_parser() -> None:
    # floors just under the measured figures (62/64 and 24/30): a rule that breaks a shape
    # the reader handles turns this red; benchmarks/bench_unseen_recall.py lists the misses
    assert recall(sorted(set(UNSEEN) - BLIND)) >= 0.95
    assert recall(sorted(BLIND)) >= 0.78


@pytest.mark.parametrize(
    ("line", "values", "step"),
    [
        # Megatron-LM (tests/data/logs/megatron/gpt2_base_n4.log line 12): the phrase names the step
        (
            " validation loss at iteration 100 | lm loss value: 8.017406E+00 | lm loss PPL: "
            "3.033300E+03 | ",
            {"val/loss": 8.017406, "val/ppl": 3033.3},
            100,
        ),
        ("eval loss after step 300 | acc 0.9", {"val/acc": 0.9}, 300),
        # `for`/`at` before a word that is no counter leaves the field as it was
        ("time for forward 12.3 | loss 0.5", {"train/loss": 0.5}, None),
    ],
)
def test_a_name_ending_at_a_counter_is_the_step_not_a_metric(line, values, step):
    assert read(line) == (values, step, None)


def test_a_lone_field_ending_at_a_counter_is_no_metric_of_that_counter():
    """`loss at epoch 3: 0.25` once read as `train/loss_at_epoch` = 3."""
    metric = parse_generic_line("loss at epoch 3: 0.25")
    assert metric is None or not any("_at_" in name for name, _ in metric.values)

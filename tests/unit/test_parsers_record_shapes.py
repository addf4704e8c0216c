"""The record reader on the shapes of Megatron, fairseq, PaddleClas, Keras and fastText lines.

With the framework parsers off, the generic reader reads these by structure: pipe records with
multi-word names and a unit in brackets, a split field, bracketed anchors before the first
field, sentences that set one value, and progress records run together on one line. Counts,
settings, wall clocks and placeholders beside them stay no metrics. The real logs are under
tests/data/logs (megatron, fairseq, paddle, keras2, fasttext, catboost, lightgbm).
"""

from __future__ import annotations

import math

import pytest

from parsers.generic_context import GenericParser
from parsers.keyvalue import last_redraw, parse_generic_line, parse_without_plans
from parsers.records import parse_record_line
from tests.unit.test_parsers_golden import DATA

MEGATRON = (
    " iteration       60/    1000 | consumed samples:          240 | elapsed time per"
    " iteration (ms): 1378.0 | learning rate: 1.494E-04 | global batch size:     4 |"
    " lm loss: 8.394111E+00 | loss scale: 16384.0 | grad norm: 5.275 | number of"
    " skipped iterations:   0 | number of nan iterations:   0 |"
)
FAIRSEQ = (
    "| epoch 005 | loss 0.158 | nll_loss 0.000 | ppl 1 | wps 770 | ups 0 | wpb 5574.176 |"
    " bsz 15.999 | num_updates 27301 | lr 1e-05 | gnorm 25.694 | clip 0.000 | oom 0.000 |"
    " loss_scale 128.000 | wall 248855 | train_wall 110662 | accuracy 0.96072"
)
PADDLE = (
    "[2022/04/04 17:51:12] root INFO: [Train][Epoch 1/20][Iter: 0/8]lr: 0.00031,"
    " CELoss: 4.64081, loss: 4.64081, batch_cost: 3.14893s, reader_cost: 2.57331,"
    " ips: 40.64869 images/sec, eta: 0:08:23"
)


def read(line: str) -> tuple[dict[str, float], int | None, float | None] | None:
    metric = parse_generic_line(line)
    return None if metric is None else (dict(metric.values), metric.step, metric.epoch)


def test_a_megatron_record_reads_its_metrics_and_no_count_or_setting() -> None:
    values, step, epoch = read(MEGATRON) or ({}, None, None)
    assert (step, epoch) == (60, None)
    assert values == {
        "throughput/it_s": pytest.approx(1000 / 1378.0),
        "lr": 1.494e-4,
        "train/loss": 8.394111,
        "grad_norm": 5.275,
    }
    # Megatron-DeepSpeed spells it `lm-loss`, and prints a loss scale of -1.0 without fp16
    deepspeed = MEGATRON.replace("lm loss:", "lm-loss:").replace("16384.0", "-1.0")
    assert read(deepspeed) == read(MEGATRON)


def test_a_megatron_validation_record_is_the_validation_side_at_its_iteration() -> None:
    line = (
        " validation loss at iteration 100 | lm loss value: 8.017406E+00 | lm loss PPL:"
        " 3.033300E+03 | "
    )
    assert read(line) == ({"val/loss": 8.017406, "val/ppl": 3033.3}, 100, None)


@pytest.mark.parametrize(("milliseconds", "rate"), [("0.0", None), ("0.1", 10000.0)])
def test_a_step_time_of_zero_is_a_placeholder_not_an_infinite_rate(
    milliseconds: str, rate: float | None
) -> None:
    line = f"iteration 5/ 10 | elapsed time per iteration (ms): {milliseconds} | lm loss: 2.5 |"
    values, _, _ = read(line) or ({}, None, None)
    assert values.get("throughput/it_s") == rate and values["train/loss"] == 2.5


def test_a_fairseq_record_leaves_out_batch_sizes_clipping_and_clocks() -> None:
    values, step, epoch = read(FAIRSEQ) or ({}, None, None)
    assert (step, epoch) == (27301, 5.0)
    # `ups 0` is a rate rounded to nothing, not a stalled run
    assert values == {
        "train/loss": 0.158,
        "train/nll_loss": 0.0,
        "train/ppl": 1.0,
        "throughput/tokens_s": 770.0,
        "lr": 1e-05,
        "grad_norm": 25.694,
        "train/acc": 0.96072,
    }
    assert read(FAIRSEQ.replace("ups 0 |", "ups 1 |"))[0]["throughput/it_s"] == 1.0  # type: ignore[index]


def test_a_fairseq_validation_record_is_named_by_its_subset_field() -> None:
    line = (
        "| epoch 005 | valid on 'valid' subset | loss 1.066 | nll_loss 0.003 | ppl 1 |"
        " num_updates 27301 | best_accuracy 0.843871 | accuracy 0.833231"
    )
    assert read(line) == (
        {
            "val/loss": 1.066,
            "val/nll_loss": 0.003,
            "val/ppl": 1.0,
            "best/acc": 0.843871,
            "val/acc": 0.833231,
        },
        27301,
        5.0,
    )


def test_bracket_anchors_behind_a_logger_prefix_give_split_and_counters() -> None:
    assert read(PADDLE) == (
        {
            "lr": 0.00031,
            "train/celoss": 4.64081,
            "train/loss": 4.64081,
            "step_time_ms": pytest.approx(3148.93),
            "throughput/samples_s": 40.64869,
            "eta_s": 503.0,
        },
        0,
        1.0,
    )
    evaluation = (
        "[2022/04/04 17:51:49] root INFO: [Eval][Epoch 5][Avg]CELoss: 3.06763,"
        " loss: 3.06763, top1: 0.58627, top5: 0.83039"
    )
    values, _, epoch = read(evaluation) or ({}, None, None)
    assert epoch == 5.0 and values["val/loss"] == 3.06763 and values["val/acc"] == 0.58627
    assert read("[2022/04/04 17:51:49] root INFO: [Eval][Epoch 5][best metric: 0.5862745]") == (
        {"best/metric": 0.5862745},
        None,
        5.0,
    )


def test_anchors_that_name_no_counter_say_nothing() -> None:
    # a rank, a level and a file are no counters: the step is the record's own
    line = "[2024-01-01 10:00:00] [INFO] [Rank 3] [trainer.py] step 7 | loss 2.5"
    assert read(line) == ({"train/loss": 2.5}, 7, None)
    assert read("[2024-01-01 10:00:00] [INFO] [Rank 3] [best epoch: 4]") is None


@pytest.mark.parametrize(
    ("line", "values", "epoch"),
    [
        ("Epoch 00001: LearningRateScheduler setting learning rate to 0.003.", {"lr": 0.003}, 1.0),
        (
            "Epoch 00007: ReduceLROnPlateau reducing learning rate to 1.0000000474974514e-05.",
            {"lr": 1.0000000474974514e-05},
            7.0,
        ),
        ("Test:  Acc@1 62.500 Acc@5 100.000", {"val/acc": 62.5, "val/acc_top5": 100.0}, None),
        ("average reward score: 4.38", {"train/reward": 4.38}, None),
    ],
)
def test_a_sentence_that_sets_one_value_is_read(
    line: str, values: dict[str, float], epoch: float | None
) -> None:
    assert read(line) == (values, None, epoch)


@pytest.mark.parametrize(
    "line",
    [
        "Epoch 00001: setting the random seed to 42.",
        "Saving the model to checkpoint 3 after the run ended.",
        "Test:  Total time: 0:00:00",
    ],
)
def test_a_sentence_that_sets_no_metric_is_not_read(line: str) -> None:
    assert parse_generic_line(line) is None


def test_progress_records_run_together_give_the_last_one() -> None:
    run = (
        "Progress:  24.7% words/sec/thread:  343550 lr:  0.075267 avg.loss:  1.294877 ETA:"
        " Progress: 100.0% words/sec/thread:  280877 lr:  0.000000 avg.loss:  0.503959 ETA:"
        "   0h 0m 0s"
    )
    assert last_redraw(run).startswith("Progress: 100.0%")
    assert dict(parse_generic_line(run).values)["train/loss"] == 0.503959  # type: ignore[union-attr]
    assert repr(parse_generic_line(run)) == repr(parse_without_plans(run))
    # a key that comes back once, with other keys before it, is no run: the line stays whole
    for line in ("loss: 0.5 val loss: 0.4", "step: 3 loss: 0.5, eval step: 3 acc: 0.9"):
        assert last_redraw(line) == line


@pytest.mark.parametrize(
    ("line", "tokens_s"),
    [
        ("step 5 | loss 2.0 | mtps 1.2", 1.2e6),  # the record reader
        ("step=5 loss=2.0 mtps=0.75", 0.75e6),  # the key-value reader, renamed
    ],
)
def test_million_tokens_a_second_is_a_token_rate(line: str, tokens_s: float) -> None:
    values, step, _ = read(line) or ({}, None, None)
    assert step == 5 and values["throughput/tokens_s"] == tokens_s and "mtps" not in values


def test_scores_of_held_out_data_are_the_validation_side_unless_named() -> None:
    line = (
        "[2022/08/08 16:28:39] ppocr INFO: cur metric, precision: 0.11526, recall: 0.19776,"
        " hmean: 0.14564, fps: 34.008"
    )
    assert read(line) == (
        {"val/precision": 0.11526, "val/recall": 0.19776, "val/hmean": 0.14564},
        None,
        None,
    )
    named = parse_record_line("cur metric, train_precision: 0.5, precision: 0.4, recall: 0.3")
    assert named is not None and dict(named.values) == {
        "train/precision": 0.5,
        "val/precision": 0.4,
        "val/recall": 0.3,
    }
    assert read("test_precision:  tensor(0.1224)") == ({"test/precision": 0.1224}, None, None)


def test_a_best_so_far_takes_the_epoch_of_its_block() -> None:
    parser = GenericParser()
    parser.feed(
        "[2022/08/08 16:28:28] ppocr INFO: epoch: [1/200], global_step: 10, lr: 0.000006,"
        " loss: 1.871535"
    )
    best = parser.feed(
        "[2022/08/08 16:28:45] ppocr INFO: best metric, hmean: 0.14564,"
        " precision: 0.11526, recall: 0.19776, fps: 34.008, best_epoch: 1"
    )
    assert best is not None and best.epoch == 1.0
    assert dict(best.values) == {
        "best/hmean": 0.14564,
        "best/precision": 0.11526,
        "best/recall": 0.19776,
    }


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("    12:\tlearn: 0.2613648\ttotal: 9.29s\tremaining: 12m 45s", 12),
        ("10:30:00\tlearn: 0.2613648\ttotal: 9.29s", None),  # a time of day is no round
    ],
)
def test_a_catboost_round_is_the_step_and_its_clocks_no_metrics(
    line: str, step: int | None
) -> None:
    assert read(line) == ({"train/loss": 0.2613648}, step, None)


@pytest.mark.parametrize(
    "line",
    [
        "loss scale: 16384.0",
        "global batch size: 4 | consumed samples: 240 | loss scale: 65536.0",
        "[LightGBM] [Info] [binary:BoostFromScore]: pavg=0.500966 -> initscore=0.003864",
        "number of skipped iterations: 0 | number of nan iterations: 0",
    ],
)
def test_counts_and_settings_are_no_metrics(line: str) -> None:
    assert parse_generic_line(line) is None


def test_the_settings_a_run_prints_first_are_no_metrics() -> None:
    parser = GenericParser()
    assert (
        parser.feed("learning rate: 0.0003 | global batch size: 512 | loss scale: 4096.0") is None
    )
    assert parser.feed(MEGATRON) is not None  # the run has begun: its records are read
    assert parser.feed("learning rate: 0.0003 | global batch size: 512") is not None


def test_the_lightgbm_banners_give_no_metric() -> None:
    lines = (DATA / "lightgbm" / "info_banner.log").read_text().splitlines()
    assert len(lines) == 12
    assert [line for line in lines if parse_generic_line(line) is not None] == []


def test_a_record_shape_is_read_the_same_from_its_recipe() -> None:
    # the second line of a shape is read by the first one's recipe, with its own numbers
    first = parse_record_line(MEGATRON)
    second = parse_record_line(MEGATRON.replace("8.394111E+00", "7.5").replace("1378.0", "2000.0"))
    assert first is not None and second is not None
    assert dict(second.values)["train/loss"] == 7.5
    assert math.isclose(dict(second.values)["throughput/it_s"], 0.5)

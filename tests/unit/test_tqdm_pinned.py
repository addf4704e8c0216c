"""tqdm bars read exactly: which bars are chores, what an evaluation bar names its values, where
the bar's numbers are read from, and a bar run into a logging record.

Each test pins values a user reads (a throughput, an ETA, a step, an epoch, a metric's name) or
that a bar gives none, on both sides of the rule it checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.tqdm_bar import TqdmParser, parse_tqdm_line

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def values(line: str) -> dict[str, float]:
    metric = parse_tqdm_line(line)
    assert metric is not None, line
    return dict(metric.values)


@pytest.mark.parametrize(
    "desc",
    ["Checkpoint loading", "Model writing", "Model saving", "Model download", "Pretokenizing"],
)
def test_a_chore_word_anywhere_in_the_description_is_no_training_bar(desc: str) -> None:
    line = f"{desc}:  50%|#####     | 1/2 [00:01<00:01,  1.00it/s]"
    assert parse_tqdm_line(line) is None
    # the same bar described without the word is training progress
    assert values(line.replace(desc, "Model")) == {"throughput/it_s": 1.0, "eta_s": 1.0}


def test_a_bar_that_opens_with_a_chore_word_is_no_training_bar() -> None:
    # huggingface_hub's snapshot download counts files in it/s
    line = "Fetching 4 files: 100%|##########| 4/4 [00:00<00:00, 12.34it/s]"
    assert parse_tqdm_line(line) is None
    assert values(line.replace("Fetching", "Reading")) == {"throughput/it_s": 12.34, "eta_s": 0.0}


def test_a_dataset_batch_bar_without_a_description_is_no_training_bar() -> None:
    # datasets 1.x `map` counts batches in `ba/s` and prints no description
    assert parse_tqdm_line("100%|##########| 3/3 [00:00<00:00, 12.50ba/s]") is None
    assert values("100%|##########| 3/3 [00:00<00:00, 12.50it/s]") == {
        "throughput/it_s": 12.5,
        "eta_s": 0.0,
    }


def test_a_real_tokenizer_and_map_bar_give_no_metric() -> None:
    seq_label = (LOGS / "hf_trainer" / "seq_label.log").read_text(encoding="utf-8").splitlines()
    ppo = (LOGS / "trl" / "ppo_console.log").read_text(encoding="utf-8").splitlines()
    assert seq_label[6].startswith("Running tokenizer on train dataset: 100%|")
    assert ppo[1].startswith("Map: 100%|")
    assert parse_tqdm_line(seq_label[6]) is None
    assert parse_tqdm_line(ppo[1]) is None


def test_spaces_after_the_bar_still_read_it() -> None:
    line = " 50%|#####     | 5/10 [00:05<00:07,  2.00it/s, loss=0.5]"
    expected = {"throughput/it_s": 2.0, "eta_s": 7.0, "train/loss": 0.5}
    assert values(line) == expected
    assert values(line + "   ") == expected
    assert values(line + " \t") == expected


def test_an_evaluation_bar_names_its_postfix_values_val() -> None:
    line = "Validation:  50%|#####     | 5/10 [00:05<00:07,  2.00it/s, loss=0.5, acc=0.9]"
    metric = parse_tqdm_line(line)
    assert metric is not None
    assert metric.values == (("eval/throughput/it_s", 2.0), ("val/loss", 0.5), ("val/acc", 0.9))
    assert metric.step is None
    # the same postfix on the training bar
    assert values(line.replace("Validation", "Training")) == {
        "throughput/it_s": 2.0,
        "eta_s": 7.0,
        "train/loss": 0.5,
        "train/acc": 0.9,
    }


def test_an_evaluation_bar_names_the_loss_in_its_description_val() -> None:
    line = "Test: Loss=0.3 Accuracy=90.1:  50%|#####     | 5/10 [00:05<00:07,  2.00it/s]"
    assert values(line) == {"eval/throughput/it_s": 2.0, "val/loss": 0.3}
    assert values(line.replace("Test", "Train")) == {
        "throughput/it_s": 2.0,
        "eta_s": 7.0,
        "train/loss": 0.3,
    }


def test_a_bar_read_as_evaluation_by_its_total_names_its_postfix_val() -> None:
    parser = TqdmParser()
    assert parser.feed(" 50%|#####     | 50/100 [00:05<00:05, 10.00it/s, loss=2.0]") is not None
    metric = parser.feed(" 50%|#####     | 5/10 [00:05<00:07,  2.00it/s, loss=0.5]")
    assert metric is not None
    assert metric.values == (("eval/throughput/it_s", 2.0), ("val/loss", 0.5))


@pytest.mark.parametrize(
    ("rate", "name"),
    [
        ("12tok", "throughput/tokens_s"),
        ("12img", "throughput/samples_s"),
        ("12samples", "throughput/samples_s"),
        ("12it", "throughput/it_s"),
    ],
)
def test_a_unit_printed_without_per_second_still_names_what_is_counted(
    rate: str, name: str
) -> None:
    assert values(f" 50%|#####     | 5/10 [00:05<00:07, {rate}]") == {name: 12.0, "eta_s": 7.0}


@pytest.mark.parametrize("bar_chars", [10, 80, 190, 191, 192, 196, 197, 250, 400])
def test_the_percentage_is_no_epoch_of_a_bar_described_epoch(bar_chars: int) -> None:
    # `tqdm(desc="Epoch")`: the description holds no number, and the 50 of `50%` that follows
    # it is no epoch; the count is the step. A terminal over 200 columns wide draws bars of
    # more than 190 characters, which once read as epoch 50.
    line = f"Epoch:  50%|{'#' * bar_chars}| 5/10 [00:05<00:07,  2.00it/s]"
    metric = parse_tqdm_line(line)
    assert metric is not None
    assert (metric.step, metric.epoch) == (5, None)
    assert dict(metric.values) == {"throughput/it_s": 2.0, "eta_s": 7.0}
    # with a number, the description gives the epoch and no step
    metric = parse_tqdm_line(line.replace("Epoch:", "Epoch 3:"))
    assert metric is not None and (metric.step, metric.epoch) == (None, 3)


@pytest.mark.parametrize(
    "desc",
    [
        "Resumed 3 [00:01, from step 0",
        "Resumed [x] 3 [00:01, from step 0",
        "Resumed [x] | 3 [00:01, from step 0",
    ],
)
def test_the_numbers_come_from_the_bar_not_an_earlier_bracket(desc: str) -> None:
    # a description that itself looks like the opening of a bar's `[elapsed, ...` bracket
    line = f"{desc}:  50%|#####     | 5/10 [00:05<00:07,  2.00it/s]"
    metric = parse_tqdm_line(line)
    assert metric is not None
    assert metric.values == (("throughput/it_s", 2.0), ("eta_s", 7.0))
    assert metric.step == 5


def test_a_bar_in_the_postfix_is_not_the_bar() -> None:
    # a `|` after the bar's bracket opens (a postfix value) is no bar: the count is the step,
    # and the 50 of `50%` is no epoch of a bar described `Epoch`
    metric = parse_tqdm_line("Epoch:  50%|#####     | 5/10 [00:05<00:07,  2.00it/s, split=a|b]")
    assert metric is not None
    assert (metric.step, metric.epoch) == (5, None)
    assert metric.values == (("throughput/it_s", 2.0), ("eta_s", 7.0))
    # a bar without a total or a bar drawn
    metric = parse_tqdm_line("train: 5it [00:05,  2.00it/s, split=a|b]")
    assert metric is not None
    assert (metric.step, metric.values) == (5, (("throughput/it_s", 2.0),))


@pytest.mark.parametrize(
    ("line", "step"), [("12it [00:05,  2.00it/s]", 12), ("5it [00:05,  2.00it/s]", 5)]
)
def test_a_count_at_the_start_of_the_line_is_read_whole(line: str, step: int) -> None:
    # `tqdm(iterable)` over an iterator without a length, and no description
    metric = parse_tqdm_line(line)
    assert metric is not None
    assert (metric.step, metric.values) == (step, (("throughput/it_s", 2.0),))


def test_a_loss_at_the_end_of_the_description_is_read() -> None:
    # `set_description(f"Loss={loss}")`: tqdm adds `: ` after it
    line = "Loss=0.3:  50%|#####     | 5/10 [00:05<00:07,  2.00it/s]"
    assert values(line) == {"throughput/it_s": 2.0, "eta_s": 7.0, "train/loss": 0.3}
    # a value that is no number is no loss
    assert values(line.replace("0.3", "0.25X")) == {"throughput/it_s": 2.0, "eta_s": 7.0}


DPO_BAR_INTO_RECORD = 25
"""Line 26 of trl/dpo_console.log: the last training bar ran into a `[INFO|...]` record."""


def dpo_line() -> str:
    lines = (LOGS / "trl" / "dpo_console.log").read_text(encoding="utf-8").splitlines()
    line = lines[DPO_BAR_INTO_RECORD]
    assert "5.91s/it][INFO|trainer.py:4309]" in line
    return line


def test_a_bar_run_into_a_record_is_read_up_to_its_bracket() -> None:
    metric = parse_tqdm_line(dpo_line())
    assert metric is not None
    assert metric.values == (("throughput/it_s", pytest.approx(1 / 5.91)), ("eta_s", 0.0))
    assert metric.step == 170


def test_brackets_in_the_record_after_the_bar_do_not_hide_it() -> None:
    line = dpo_line() + " and out/ckpt[1][2] too"
    metric = parse_tqdm_line(line)
    assert metric is not None and metric.step == 170
    assert metric.values == (("throughput/it_s", pytest.approx(1 / 5.91)), ("eta_s", 0.0))


def test_brackets_in_the_description_before_the_record_do_not_hide_it() -> None:
    tail = dpo_line().split("100%|", 1)[1]
    for desc, epoch in (("Epoch [1][2]: ", 1), ("Epoch [1][2][3]: ", 1)):
        line = f"{desc}100%|{tail} to out/ckpt[1][2] too"
        metric = parse_tqdm_line(line)
        assert metric is not None, line
        assert (metric.step, metric.epoch) == (None, epoch)
        # an epoch's bar: its remaining time is no ETA of the run
        assert metric.values == (("throughput/it_s", pytest.approx(1 / 5.91)),)


def test_a_record_without_a_level_after_a_bar_gives_no_metric() -> None:
    line = dpo_line().replace("[INFO|", "[NOTE|")
    assert parse_tqdm_line(line) is None


@pytest.mark.parametrize("width", [1, 10, 84, 190])
def test_a_bar_without_a_percentage_is_read_after_it(width: int) -> None:
    # a bar without a total (`| 3/? [...]`): no percentage before it, the counts after a blank
    line = "Training: |" + " " * width + "| 3/? [00:01, 2.50it/s]"
    metric = parse_tqdm_line(line)
    assert metric is not None
    assert (metric.step, metric.values) == (3, (("throughput/it_s", 2.5),))
    evaluation = parse_tqdm_line("\rValidation: |" + " " * width + "| 2/? [00:01, 2.00it/s]\x1b[A")
    assert evaluation is not None
    assert (evaluation.step, evaluation.values) == (None, (("eval/throughput/it_s", 2.0),))
    # before its first rate such a bar gives nothing
    assert parse_tqdm_line("Validation: |" + " " * width + "| 0/? [00:00<?, ?it/s]") is None

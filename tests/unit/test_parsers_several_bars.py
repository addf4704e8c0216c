"""Several tqdm bars in one log, and Trainer consoles whose redraws ran together.

The lines are copied from the real logs under tests/data/logs/hf_trainer (see its README):
`with_tqdm.log` (transformers 5 Trainer), `seq_label.log` (egilron/seq-label) and
`thai2transformers_ner.log` (vistec-AI/thai2transformers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuherd.parse.parse_command import iter_lines
from parsers.model import LogMetric
from parsers.registry import make_parser

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs" / "hf_trainer"


def lines(name: str) -> list[str]:
    with (LOGS / name).open("rb") as handle:
        return list(iter_lines(handle))


def feed_all(log_format: str, name: str) -> dict[int, LogMetric]:
    parser = make_parser(log_format)
    found = {}
    for number, line in enumerate(lines(name), 1):
        metric = parser.feed(line)
        if metric is not None:
            found[number] = metric
    return found


@pytest.mark.parametrize("log_format", ["hf_trainer", "tqdm"])
def test_a_finished_evaluation_bar_reports_no_eta_and_no_step(log_format: str) -> None:
    # Line 6 is the training bar (6/24), line 10 the evaluation bar finishing (2/2). Before,
    # line 10 gave `throughput/it_s` 684.95, `eta_s` 0 and step 2: the run looked finished.
    found = feed_all(log_format, "with_tqdm.log")
    assert found[6].values == (("throughput/it_s", 81.65), ("eta_s", 0.0))
    assert found[6].step == 6
    assert found[10].values == (("eval/throughput/it_s", 684.95),)
    assert found[10].step is None
    assert found[9].step == 8  # the training bar again, after the evaluation
    assert found[30].values == (("eval/throughput/it_s", 621.1),)


def test_the_largest_total_is_the_training_bar_whatever_came_first() -> None:
    parser = make_parser("tqdm")
    first = parser.feed("100%|██████████| 2/2 [00:00<00:00, 684.95it/s]")
    assert first is not None and first.step == 2  # nothing larger seen yet: training
    train = parser.feed(" 25%|██▌       | 6/24 [00:00<00:00, 81.65it/s]")
    assert train is not None and train.step == 6
    later = parser.feed("100%|██████████| 2/2 [00:00<00:00, 579.16it/s]")
    assert later is not None and later.values == (("eval/throughput/it_s", 579.16),)
    parser.reset()  # a truncated or rotated log starts over
    again = parser.feed("100%|██████████| 2/2 [00:00<00:00, 579.16it/s]")
    assert again is not None and again.step == 2


def test_dataset_and_tokenizer_bars_never_count_as_training() -> None:
    # seq_label.log: three `Running tokenizer on ... dataset` bars of 8570, 1513 and 1252
    # examples come before the training bar of 536 steps; before, each gave `eta_s` 0 and
    # a step (8570), and the largest-total rule would have taken them for training.
    found = feed_all("hf_trainer", "seq_label.log")
    assert not {6, 7, 8, 9} & set(found)
    assert found[15].values == (("throughput/it_s", 3.83), ("eta_s", 26.0))
    assert found[15].step == 436
    assert found[21].values == (("throughput/it_s", 3.38), ("eta_s", 0.0))
    assert found[21].step == 536
    # the prediction bar after training (157 steps) is an evaluation bar
    assert found[34].values == (("eval/throughput/it_s", 35.57),)
    assert found[34].step is None


def test_a_dict_that_a_redraw_cut_short_keeps_its_values() -> None:
    # thai2transformers_ner.log line 35: a bar redraw ran into the dict before its `}`;
    # line 36: a bar, then a dict cut short at the end of the line. Both gave nothing before.
    found = feed_all("hf_trainer", "thai2transformers_ner.log")
    assert found[35].values == (("train/loss", 0.05275115966796875), ("lr", 2.2222222222222223e-05))
    assert found[35].epoch == 3.7735849
    assert found[36].values == (("train/loss", 0.05139984130859375), ("lr", 1.9444444444444445e-05))
    assert found[36].epoch == 4.08805031
    # an evaluation dict cut inside a key keeps the values before it
    assert dict(found[26].values)["val/loss"] == 0.08590535074472427


def test_a_run_together_line_keeps_the_dict_between_bars() -> None:
    # seq_label.log line 16: a cut bar, a whole bar, then the dict, on one line
    found = feed_all("hf_trainer", "seq_label.log")
    assert dict(found[16].values)["train/loss"] == 0.0351
    assert found[16].epoch == 2.0
    # the shape of the issue: bar, dict, bar, with nothing between them
    parser = make_parser("hf_trainer")
    metric = parser.feed(
        "  4%|▍         | 10/256 [00:02<00:50,  4.87it/s]{'loss': 2.1, 'learning_rate': "
        "4.8e-05, 'epoch': 0.04}  5%|▍         | 11/256 [00:02<00:50,  4.87it/s]"
    )
    assert metric is not None
    assert metric.values == (("train/loss", 2.1), ("lr", 4.8e-05))
    assert metric.epoch == 0.04


def test_an_empty_value_of_a_cut_dict_is_left_out_not_an_error() -> None:
    metric = make_parser("hf_trainer").feed(
        " 60%|██████    | 600/1000 [06:05<28:12,  4.23s/it]{'loss': 0.0527, 'epoch': "
    )
    assert metric is not None and metric.values == (("train/loss", 0.0527),)
    assert metric.epoch is None


@pytest.mark.parametrize("log_format", ["hf_trainer", "tqdm"])
def test_a_bar_run_into_a_logging_record_is_read_and_the_record_is_not(log_format: str) -> None:
    # trl/dpo_console.log line 26 (a TRL DPO run under LLaMA-Factory): the last bar frame and
    # `[INFO|trainer.py:4309] 2025-12-30 20:15:41,698 >> Saving model checkpoint to ...` with no
    # newline between. Before, the line did not end with the bar's `]` and gave nothing.
    with (LOGS.parent / "trl" / "dpo_console.log").open("rb") as handle:
        line = list(iter_lines(handle))[25]
    assert "5.91s/it][INFO|trainer.py:4309]" in line
    parser = make_parser(log_format)
    metric = parser.feed(line)
    assert metric is not None and metric.step == 170
    assert metric.values == (("throughput/it_s", pytest.approx(1 / 5.91)), ("eta_s", 0.0))
    # the record alone, or a line that merely holds `][` (PaddleClas), is no bar
    bars_only = make_parser(log_format, plain_lines=False)
    assert bars_only.feed(line[line.index("[INFO|") :]) is None
    with (LOGS.parent / "paddle" / "ppcls_config_dump.log").open("rb") as handle:
        paddle = list(iter_lines(handle))[74]
    assert "][Iter: 0/8]lr: 0.00031" in paddle
    assert bars_only.feed(paddle) is None

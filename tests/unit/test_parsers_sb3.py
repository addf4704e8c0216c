"""Stable-Baselines3 console tables: one metric per table, at its closing rule and its step."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.model import LogMetric
from parsers.registry import detect_format, make_parser

REAL = Path(__file__).resolve().parents[1] / "data" / "logs" / "sb3" / "ppo_breakout.log"
RULE = "-----------------------------------------"


def table(*rows: str) -> list[str]:
    return [RULE, *rows, RULE]


def feed_all(lines: list[str], log_format: str = "sb3") -> list[LogMetric | None]:
    parser = make_parser(log_format)
    return [parser.feed(line + "\n") for line in lines]


def test_the_real_console_is_detected_as_sb3() -> None:
    lines = REAL.read_text().splitlines(keepends=True)
    assert detect_format(lines[:40], "train.log") == "sb3"
    # the first table alone (no `train/` section) is enough
    assert detect_format(lines[:17], "") == "sb3"


def test_a_megatron_line_with_bars_is_not_a_table() -> None:
    line = (
        " iteration      100/  500000 | consumed samples: 100 | elapsed time per iteration "
        "(ms): 1234.5 | lm loss: 7.123456E+00 |"
    )
    assert detect_format([line], "") == "megatron"


def test_a_table_is_one_metric_given_at_its_closing_rule() -> None:
    lines = table(
        "| rollout/                |             |",
        "|    ep_rew_mean          | 1.53        |",
        "| time/                   |             |",
        "|    fps                  | 67          |",
        "|    iterations           | 2           |",
        "|    time_elapsed         | 60          |",
        "|    total_timesteps      | 4096        |",
        "| train/                  |             |",
        "|    approx_kl            | 0.008046303 |",
        "|    clip_range           | 0.2         |",
        "|    learning_rate        | 0.0003      |",
        "|    loss                 | -0.00948    |",
        "|    n_updates            | 10          |",
        "|    value_loss           | 0.0626      |",
    )
    results = feed_all(lines)
    assert results[:-1] == [None] * (len(lines) - 1)  # the rows only gather
    assert results[-1] == LogMetric(
        (
            ("rollout/ep_rew_mean", 1.53),
            ("throughput/samples_s", 67.0),
            ("train/approx_kl", 0.008046303),
            ("lr", 0.0003),
            ("train/loss", -0.00948),
            ("train/value_loss", 0.0626),
        ),
        step=4096,
    )


def test_each_table_stands_alone_and_sections_do_not_carry_over() -> None:
    first = table(
        "| rollout/ |     |",
        "|    ep_rew_mean | 0.5 |",
        "| time/ |  |",
        "|    total_timesteps | 100 |",
    )
    # a key before any section of the next table is not `rollout/`'s
    second = table("|    ep_rew_mean | 0.25 |", "| time/ |  |", "|    total_timesteps | 200 |")
    results = [m for m in feed_all(first + second) if m is not None]
    assert results == [
        LogMetric((("rollout/ep_rew_mean", 0.5),), step=100),
        LogMetric((("ep_rew_mean", 0.25),), step=200),
    ]


def test_the_step_is_time_total_timesteps_only() -> None:
    # under `train/` it is `train/total_timesteps`, a value: only the `time/` one is the step
    rows = ("| train/ |  |", "|    total_timesteps | 100 |", "|    loss | 0.5 |")
    assert feed_all(table(*rows))[-1] == LogMetric(
        (("train/total_timesteps", 100.0), ("train/loss", 0.5))
    )
    assert feed_all(table("| time/ |  |", "|    total_timesteps | 1e+06 |", "|    fps | 12 |"))[
        -1
    ] == LogMetric((("throughput/samples_s", 12.0),), step=1_000_000)


def test_words_are_skipped_and_a_table_of_counters_gives_nothing() -> None:
    assert feed_all(
        table("| rollout/ |  |", "|    env_id | Breakout... |", "|    ep_rew_mean | 2.5 |")
    )[-1] == LogMetric((("rollout/ep_rew_mean", 2.5),))
    assert (
        feed_all(
            table(
                "| time/ |  |",
                "|    iterations | 1 |",
                "|    time_elapsed | 11 |",
                "|    total_timesteps | 2048 |",
            )
        )[-1]
        is None
    )


def test_a_bad_step_makes_the_table_an_unparsed_line() -> None:
    parser = make_parser("sb3")
    for line in table("| time/ |  |", "|    total_timesteps | -5 |")[:-1]:
        assert parser.feed(line) is None
    with pytest.raises(ValueError, match="step"):
        parser.feed(RULE)


def test_a_table_cut_short_gives_nothing_until_a_rule_and_reset_forgets_it() -> None:
    parser = make_parser("sb3")
    for line in (RULE, "| train/ |  |", "|    loss | 0.5 |"):
        assert parser.feed(line) is None
    parser.reset()
    assert parser.feed(RULE) is None  # the rows before the reset are gone


def test_other_lines_are_no_table_rows() -> None:
    results = feed_all(
        ["Using cpu device", "| a | b | c |", "||", "--", RULE, "|    loss | 0.5 |", RULE]
    )
    assert results == [None] * 6 + [LogMetric((("train/loss", 0.5),))]


def test_the_real_console_gives_one_metric_per_table() -> None:
    lines = REAL.read_text().splitlines(keepends=True)
    parser = make_parser("sb3")
    found = [
        (number, metric)
        for number, line in enumerate(lines, 1)
        if (metric := parser.feed(line)) is not None
    ]
    assert [number for number, _ in found] == [16, 37, 58, 79]
    assert [metric.step for _, metric in found] == [2048, 4096, 6144, 8192]
    assert dict(found[1][1].values)["train/approx_kl"] == 0.0142255565

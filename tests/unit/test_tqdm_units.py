"""tqdm rates: the SI suffix scales the number, and the unit decides what is counted.

`2.41kit/s` is 2,410 iterations a second; `img/s` counts samples and `tok/s` tokens, which the
dashboard and a run summary show under different names and units.
"""

from __future__ import annotations

import pytest

from parsers.tqdm_bar import parse_tqdm_line


def bar(rate: str, desc: str = "", n: str = "5/10") -> str:
    head = f"{desc}: " if desc else ""
    return f"{head} 50%|#####     | {n} [00:05<00:07, {rate}]"


def values(line: str) -> dict[str, float]:
    metric = parse_tqdm_line(line)
    assert metric is not None, line
    return dict(metric.values)


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        ("2.41it/s", 2.41),
        ("2.41kit/s", 2410.0),
        ("1.5Mit/s", 1_500_000.0),
        ("3Git/s", 3e9),
        ("2Tit/s", 2e12),
    ],
)
def test_a_suffix_scales_the_rate(rate: str, expected: float) -> None:
    assert values(bar(rate)) == {
        "throughput/it_s": pytest.approx(expected, rel=1e-12),
        "eta_s": 7.0,
    }


@pytest.mark.parametrize(
    ("rate", "name", "expected"),
    [
        ("241.3img/s", "throughput/samples_s", 241.3),
        ("241.3imgs/s", "throughput/samples_s", 241.3),
        ("12images/s", "throughput/samples_s", 12.0),
        ("12image/s", "throughput/samples_s", 12.0),
        ("64samples/s", "throughput/samples_s", 64.0),
        ("64sample/s", "throughput/samples_s", 64.0),
        ("8.5ex/s", "throughput/samples_s", 8.5),
        ("1.2ktok/s", "throughput/tokens_s", 1200.0),
        ("900tokens/s", "throughput/tokens_s", 900.0),
        ("900token/s", "throughput/tokens_s", 900.0),
        ("4.00batch/s", "throughput/it_s", 4.0),
        ("3.00step/s", "throughput/it_s", 3.0),
    ],
)
def test_the_unit_decides_what_is_counted(rate: str, name: str, expected: float) -> None:
    assert values(bar(rate)) == {name: pytest.approx(expected), "eta_s": 7.0}


@pytest.mark.parametrize(
    ("rate", "name", "expected"),
    [
        ("2.00s/it", "throughput/it_s", 0.5),
        ("4.00s/img", "throughput/samples_s", 0.25),
        ("0.50s/tok", "throughput/tokens_s", 2.0),
    ],
)
def test_seconds_per_unit_become_a_rate_of_that_unit(rate: str, name: str, expected: float) -> None:
    assert values(bar(rate)) == {name: expected, "eta_s": 7.0}


def test_zero_seconds_per_iteration_is_no_rate() -> None:
    assert values(bar("0.00s/it")) == {"eta_s": 7.0}


def test_an_unknown_rate_is_no_rate() -> None:
    assert parse_tqdm_line(" 50%|#####     | 5/10 [00:05<?, ?it/s]") is None


@pytest.mark.parametrize("rate", ["1.00MB/s", "512kB/s", "2.00B/s", "2.00s/MB"])
def test_byte_bars_are_not_training(rate: str) -> None:
    assert parse_tqdm_line(bar(rate, "model.bin", n="5.0M/10.0M")) is None


def test_an_evaluation_bar_names_its_rate_eval_and_gives_no_eta_or_step() -> None:
    metric = parse_tqdm_line(bar("120img/s", "Validation DataLoader 0"))
    assert metric is not None
    assert metric.values == (("eval/throughput/samples_s", 120.0),)
    assert metric.step is None


def test_a_suffixed_count_is_the_step() -> None:
    metric = parse_tqdm_line(bar("2.41kit/s", n="5.00k/10.0k"))
    assert metric is not None and metric.step == 5000


def test_postfix_values_follow_the_rate() -> None:
    metric = parse_tqdm_line(bar("1.5Mtok/s, loss=2.5, lr=1e-4, mode=train, v_num=3"))
    assert metric is not None
    assert metric.values == (
        ("throughput/tokens_s", 1_500_000.0),
        ("eta_s", 7.0),
        ("train/loss", 2.5),
        ("lr", 0.0001),
    )
    assert metric.step == 5

"""The generic parser's line plans give what the pair regex gives, line for line.

`parse_generic_line` reads a line of a shape it has parsed before with a plan (the places of
its numbers); `parse_without_plans` is the regex path every line took before, kept as the
reference.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import keyvalue
from parsers.keyvalue_plans import LinePlans
from parsers.model import LogMetric
from tests.depth import depth

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


def reference(line: str) -> LogMetric | None:
    """The generic parser as it was: every line through the pair regex."""
    return keyvalue.parse_without_plans(line)


def outcome(parse: object, line: str) -> str:
    """What a parse gives, as text: the metric (NaN equal to NaN) or the error raised."""
    try:
        return repr(parse(line))  # type: ignore[operator]
    except Exception as error:  # noqa: BLE001 - the error itself is what is compared
        return f"{type(error).__name__}: {error}"


@pytest.fixture(autouse=True)
def fresh_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyvalue, "_PLANS", LinePlans())


# Pieces of metric lines and their near misses: keys with and without digits, counters,
# config keys, separators, numbers of every written form, words, warnings, stamps, rules.
PIECES = st.sampled_from(
    [
        "step",
        "iter",
        "epoch",
        "Epoch ",
        "loss",
        "val_loss",
        "lr",
        "grad_norm",
        "acc1",
        "acc5",
        "top1",
        "map50",
        "x9",
        "eta",
        "remaining",
        "LOCAL_RANK",
        "CUDA_0",
        "a.b",
        "f(x)",
        "_",
        "=",
        "= ",
        " = ",
        ":",
        ": ",
        " : ",
        " ",
        "  ",
        "\t",
        ",",
        "|",
        "/",
        "-",
        "[",
        "]",
        "(",
        ")",
        "'",
        "%",
        ".",
        "e",
        "E",
        "+",
        "12",
        "0.5",
        "1e-5",
        "3E+2",
        ".5",
        "5.",
        "1,234",
        "12:30",
        "0:00:01",
        "1 day, 2:03:04",
        "'0.25'",
        "5%",
        "9" * 20,
        "1" * 330,
        "nan",
        "inf",
        "-inf",
        "INFO ",
        "WARNING ",
        "Warning",
        "Tip:",
        "x.py:12: ",
        "`",
        "it/s",
        "ms",
        "s",
        "h",
        "2026-11-26 06:07:46,953 ",
        "[2026-11-26 06:07:46.5] ",
        "2026-13-40 25:61:99 ",
        "2026-11-26T06:07:46 ",
        "===",
        "---",
        "***",
        "~~",
        "#",
        "\x1b[32m",
        "\r",
        "\u00e9",
        "\u0661",
        "\u00a0",
        "Epoch [",
        "Step [",
        "Iter:[",
        "/600]",
        "[1,  2000]",
        "Test set: ",
        "Average ",
        "MeanIU",
        "mIoU",
        "Accuracy",
        "9820/10000",
        "(98%)",
        " | ",
        "valid loss ",
        "ms/batch ",
        "ppl ",
        "it ",
        "%|",
        "\u2588",
        "\u258c",
        "\u2501",
        "\u2022",
        "\ud800",
    ]
)
KEYS = st.sampled_from(
    [
        "step",
        "iter",
        "epoch",
        "loss",
        "val_loss",
        "lr",
        "grad_norm",
        "acc1",
        "acc5",
        "top1",
        "map50",
        "x9",
        "eta",
        "remaining",
        "LOCAL_RANK",
        "CUDA_0",
        "a.b",
        "f(x)",
        "Epoch",
        "INFO",
        "tokens/s",
        "\u00e9t\u00e9",
        "MeanIU",
        "Accuracy",
        "Iter",
        "Step",
        "Loss",
        "Acc",
    ]
)
NUMBERS = st.sampled_from(
    [
        "12",
        "0.5",
        "1e-5",
        "3E+2",
        ".5",
        "5.",
        "-7",
        "+0.25",
        "1,234",
        "12:30",
        "0:00:01",
        "'0.25'",
        "5%",
        "9" * 20,
        "1" * 330,
        "nan",
        "inf",
        "-inf",
        "1.2.3",
        "4x",
        "0.5/",
        "12a",
        "\u0661",
        "9820/10000",
        "1/3",
        "[0.005]",
        "[2/35]",
        "200,",
        "1,0,696",
    ]
)
PAIRS = st.tuples(
    KEYS, st.sampled_from(["=", "=", "=", ": ", ":", " = ", "= ", " ", "  "]), NUMBERS
).map("".join)
PREFIXES = st.sampled_from(
    [
        "",
        "",
        "2026-11-26 06:07:46,953 ",
        "2026-11-26 06:07:46,953 INFO ",
        "[2026-11-26 06:07:46.5] ",
        "2026-11-26T06:07:46 ",
        "2026-13-40 25:61:99 ",
        "INFO ",
        "WARNING ",
        "Epoch 3 | ",
        "Tip: ",
        "x.py:12: ",
        "=== ",
        "a few words of prose here ",
        "\x1b[32m",
        "12:30 ",
        "Test set: ",
        "Epoch [1/3], Step [100/600], ",
        "[1,  2000] ",
        "Epoch: [0/237] ",
        "| epoch   1 | ",
        "Validation: ",
        # lines that are not ASCII have plans as well: a bar cut at the terminal's edge
        "Epoch 2: 100%|\u2588| 16/16 [00:00<00:00, 291.16it/s, ",
        "\u2501\u2501 12/12 ",
        "\u00e9poque 3 ",
    ]
)
# Metric-shaped lines (pairs after a stamp or a word), with near misses mixed in, and lines
# of loose pieces.
SHAPED = st.tuples(
    PREFIXES,
    st.lists(
        st.integers(0, 5).flatmap(lambda i: PIECES if i == 0 else PAIRS), min_size=1, max_size=6
    ),
    st.sampled_from([" ", " ", "  ", ", ", " | ", "\t", "", " ", ", "]),
).map(lambda parts: parts[0] + parts[2].join(parts[1]))
TEMPLATES = st.integers(0, 3).flatmap(
    lambda i: st.lists(PIECES, min_size=1, max_size=24).map("".join) if i == 0 else SHAPED
)


def variants(line: str, rng: random.Random, count: int) -> Iterator[str]:
    """`line` with its ASCII digits drawn afresh: the same shape, other numbers."""
    for _ in range(count):
        yield re.sub(r"[0-9]", lambda _: rng.choice("0123456789"), line)


@pytest.mark.slow
@settings(max_examples=depth(500, 1500), deadline=None)
@given(template=TEMPLATES, seed=st.integers(0, 2**32 - 1))
def test_lines_of_one_shape_parse_as_the_regex_path_parses_them(template: str, seed: int) -> None:
    rng = random.Random(seed)
    lines = [template, template, *variants(template, rng, 10)]
    for line in lines:
        assert outcome(keyvalue.parse_generic_line, line) == outcome(reference, line), line


def test_every_line_of_the_sample_logs_parses_as_before_also_once_plans_are_made() -> None:
    lines = [
        line
        for path in sorted(DATA.rglob("*"))
        if path.is_file() and not path.name.endswith(".expected.json")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    assert len(lines) > 1000
    # three rounds: shapes seen once, plans made, plans replayed
    for _ in range(3):
        for line in lines:
            assert outcome(keyvalue.parse_generic_line, line) == outcome(reference, line), line


class CountingPair:
    """The pair regex, counting the lines it is run on."""

    def __init__(self) -> None:
        self.runs = 0
        self.real = keyvalue._PAIR

    def split(self, text: str) -> list[str]:
        self.runs += 1
        return self.real.split(text)

    def finditer(self, text: str, *span: int) -> Iterator[re.Match[str]]:
        self.runs += 1
        return self.real.finditer(text, *span)


def parse_counting_pair_runs(
    monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> tuple[int, list[LogMetric | None]]:
    """How often the pair regex ran while the generic parser read `lines`, and its metrics."""
    pair = CountingPair()
    monkeypatch.setattr(keyvalue, "_PAIR", pair)
    metrics = [keyvalue.parse_generic_line(line) for line in lines]
    return pair.runs, metrics


def test_a_log_of_one_shape_runs_the_pair_regex_only_while_the_shape_is_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The regex split cost a third of a timestamped line's parse, and a log prints the same
    # shape over and over: it runs for the first two lines and to make the plan, then no more.
    lines = [
        f"2031-05-06 07:08:{i // 1000:02},{i % 1000:03} INFO step={i % 900 + 100} "
        f"loss={1 + i / 10_000:.4f} lr=0.05 grad_norm={(i % 97) / 100:.2f}"
        for i in range(2000)
    ]
    runs, metrics = parse_counting_pair_runs(monkeypatch, lines)
    assert runs == 3
    second = time.mktime((2031, 5, 6, 7, 8, 1, 0, 0, -1))
    assert metrics[1234] == LogMetric(
        (("train/loss", 1.1234), ("lr", 0.05), ("grad_norm", 0.7)), 434, None, second + 0.234
    )


def test_lines_that_are_not_ascii_are_read_by_a_plan_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a Lightning bar cut at the terminal's edge, which the tqdm format leaves to this parser:
    # the bar's `█` once made every such line take the regex
    lines = [
        f"Epoch {i // 100}: 100%|\u2588| 16/16 [00:00<00:00, {200 + i % 97}.16it/s, "
        f"v_num=0, train_loss=0.{i:03}, train_acc_step=1.000, val_loss=0.606, val_a"
        for i in range(300)
    ]
    runs, metrics = parse_counting_pair_runs(monkeypatch, lines)
    assert runs == 3
    assert metrics[123] == LogMetric(
        (("train/loss", 0.123), ("train/acc", 1.0), ("val/loss", 0.606)), None, 1.0
    )


def test_keys_that_differ_in_digits_only_keep_their_own_names() -> None:
    # `acc1` and `acc5` lines have one shape: top-1 and top-5 accuracy must not be mixed up
    lines = [f"step={i} acc{1 if i % 2 else 5}=0.{i}" for i in range(10, 40)]
    for i, line in zip(range(10, 40), lines, strict=True):
        name = "train/acc" if i % 2 else "train/acc_top5"
        assert keyvalue.parse_generic_line(line) == LogMetric(((name, i / 100),), i)


def test_a_bad_count_on_a_known_shape_raises_the_parsers_own_error() -> None:
    for step in (
        "1e+00",
        "2e+00",
        "3e+00",
        "0000000000000000001",
        "0000000000000000002",
        "0000000000000000003",
    ):
        assert keyvalue.parse_generic_line(f"step={step} loss=0.5") is not None
    with pytest.raises(ValueError, match=r"^step 1e\+30 is not a count from 0 to 2\*\*53$"):
        keyvalue.parse_generic_line("step=1e+30 loss=0.5")
    with pytest.raises(ValueError, match=r"^step 1e\+19 is not a count from 0 to 2\*\*53$"):
        keyvalue.parse_generic_line("step=9999999999999999999 loss=0.5")
    assert keyvalue.parse_generic_line("step=9007199254740992 loss=0.5") == LogMetric(
        (("train/loss", 0.5),), 2**53
    )


def test_plans_follow_a_time_zone_change(monkeypatch: pytest.MonkeyPatch) -> None:
    stamps = {}
    try:
        for zone in ("UTC", "EST+05"):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            metrics = [
                keyvalue.parse_generic_line(f"2032-05-06 07:08:09,{ms:03} step=1 loss=0.5")
                for ms in range(5)
            ]
            stamps[zone] = [m.taken_at for m in metrics]  # type: ignore[union-attr]
    finally:
        monkeypatch.undo()
        time.tzset()
    for utc, est in zip(stamps["UTC"], stamps["EST+05"], strict=True):
        assert math.isclose(est - utc, 5 * 3600)


def test_a_shape_whose_start_comes_back_is_never_read_by_its_plan_alone() -> None:
    # `acc1: ... acc5: ...` is one line of pairs; the same shape with its first key repeated
    # exactly is two records run together, of which the last counts (`last_redraw`)
    whole = "acc1: 0.5 loss: 0.7 acc5: 0.4 loss: 0.6"
    run = "acc1: 0.5 loss: 0.7 acc1: 0.4 loss: 0.6"
    for _ in range(4):  # the plan is made and replayed
        assert outcome(keyvalue.parse_generic_line, whole) == outcome(reference, whole)
    assert keyvalue.parse_generic_line(run) == LogMetric((("train/acc", 0.4), ("train/loss", 0.6)))


def test_a_shape_read_as_it_is_skips_the_other_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    # after its plan is made, a `step: 12 loss: 0.4567` line is read by the plan alone
    for i in range(3):
        keyvalue.parse_generic_line(f"step: {i} loss: 0.{i}567")
    for other in ("_mapping_metric", "last_redraw", "read_better", "_keyvalue_metric"):
        monkeypatch.setattr(keyvalue, other, None)  # would raise if called
    assert keyvalue.parse_generic_line("step: 7 loss: 0.1234") == LogMetric(
        (("train/loss", 0.1234),), 7
    )

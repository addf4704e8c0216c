"""Property tests: every parser gives None, a metric obeying `check_metric`'s rules, or ValueError.

The rules pinned here (`parsers.values`): values are floats with a printable, non-blank name;
each is finite, NaN, or +-Inf only for a loss, gradient norm or perplexity; step and epoch are
finite counts from 0 to 2**53; `taken_at` is a date from 1970 to 1e11.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import safe_json
from parsers.findings import findings_from_metric, scan_line
from parsers.hf_trainer import parse_trainer_state
from parsers.model import LogMetric
from parsers.registry import DOCUMENT_FORMATS, FORMAT_NAMES, detect_format, make_parser
from parsers.text import MAX_LINE_CHARS, normalise_line
from parsers.values import MAX_COUNTER, MAX_TAKEN_AT, may_be_infinite
from tests.depth import depth as fuzz_depth

pytestmark = pytest.mark.slow  # thousands of generated inputs

LINE_FORMATS = [name for name in FORMAT_NAMES if name not in DOCUMENT_FORMATS]
# Text built from the pieces log lines are made of, so the regexes get near-misses, not noise.
PIECES = st.sampled_from(
    [
        "loss",
        "=",
        ": ",
        "step",
        "Epoch ",
        "1/3",
        "[",
        "]",
        "|",
        "%",
        "it/s",
        "s/it",
        "{'",
        "'",
        '{"',
        '"',
        "}",
        ",",
        "nan",
        "-inf",
        "1e-5",
        "1,234.5",
        "\r",
        "\x1b[32m",
        "\b",
        " ",
        "  ",
        "━",
        "•",
        "0:00:01",
        "iter ",
        "ms",
        "/step",
        " - ",
        "copypaste: ",
        "Task: ",
        "(train)",
        "Acc@1 ",
        "Train: ",
        "Test: ",
        "eta: ",
        "d2.utils.events]:",
        "\udcff",
        "\x00",
        "9",
        ".",
        "1e309",
        "1e-310",
        "0.00",
        "inf",
        "epoch",
        "lr",
        "\ufeff",
        "N/A",
        "None",
        "tensor(1.2)",
        "9" * 30,
        "Epoch(train) [",
        "] ",
        " INFO ",
        "all ",
        "GPU_mem",
        "\t",
    ]
)
LINES = (
    st.lists(PIECES, max_size=40).map("".join)
    | st.text(max_size=200)
    | st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", errors="replace"))
)
# Numbers as logs and JSON writers print them: ordinary, subnormal, huge, non-finite, and
# integers far beyond a float's range.
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**400), max_value=10**400).map(str),
    st.sampled_from(
        [
            "inf",
            "-inf",
            "nan",
            "Infinity",
            "1e309",
            "-1e309",
            "1e308",
            "1e-310",
            "5e-324",
            "-0",
            "0",
            "1",
            "2e53",
            str(2**53),
            str(2**53 + 2),
            "1e10000",
        ]
    ),
)
SETTINGS = settings(max_examples=fuzz_depth(80, 300), deadline=None)


def assert_valid(metric: LogMetric | None) -> None:
    """`metric` is None or obeys every rule of `parsers.values.check_metric`."""
    if metric is None:
        return
    assert isinstance(metric, LogMetric)
    assert metric.values
    for name, value in metric.values:
        assert isinstance(name, str) and name.strip() and name.isprintable(), name
        assert type(value) is float, (name, value)
        assert math.isfinite(value) or math.isnan(value) or may_be_infinite(name), (name, value)
    if metric.step is not None:
        assert type(metric.step) is int and 0 <= metric.step <= MAX_COUNTER
    if metric.epoch is not None:
        assert type(metric.epoch) is float and 0.0 <= metric.epoch <= MAX_COUNTER
    if metric.taken_at is not None:
        assert 0.0 <= metric.taken_at <= MAX_TAKEN_AT
    assert metric.unparsed_values >= 0
    findings_from_metric(metric)  # and the findings it supports can be built


def feed_all(log_format: str, lines: list[str]) -> list[LogMetric | None]:
    parser = make_parser(log_format)
    out: list[LogMetric | None] = []
    for line in lines:
        try:
            result = parser.feed(line)
        except ValueError:
            result = None
        assert_valid(result)
        out.append(result)
    parser.reset()
    return out


@SETTINGS
@given(lines=st.lists(LINES, min_size=1, max_size=8))
@pytest.mark.parametrize("log_format", LINE_FORMATS)
def test_any_text_gives_a_valid_metric_none_or_value_error(
    log_format: str, lines: list[str]
) -> None:
    feed_all(log_format, lines)


@SETTINGS
@given(numbers=st.lists(NUMBERS, min_size=6, max_size=6))
@pytest.mark.parametrize("log_format", LINE_FORMATS)
def test_any_number_in_any_format_gives_valid_metrics(log_format: str, numbers: list[str]) -> None:
    a, b, c, d, e, f = numbers
    lines = [
        f"step={a} epoch={b} loss={c} lr={d}",
        "epoch,step,loss,lr,acc",
        f"{a},{b},{c},{d},{e}",
        f'{{"step": {a}, "epoch": {b}, "loss": {c}, "lr": {d}, "time": {e}}}',
        f"{{'loss': '{c}', 'grad_norm': {d}, 'learning_rate': {e}, 'epoch': {b}}}",
        "Epoch 1/3",
        f"12/12 ━━━━ {a}s {b}ms/step - loss: {c} - acc: {d}",
        f"Epoch {a}:  50%|█████     | 5/10 [00:01<00:01, {b}it/s, loss={c}, v_num=0]",
        f"iter {a}: loss {c}, time {b}ms, mfu {d}%",
        f"2024-05-02 10:00:00,189 - mmseg - INFO - Epoch [{a}][4/8]\tlr: {d}, loss: {c}",
        f"[11/26 06:01:57 d2.utils.events]:  eta: 0:00:01  iter: {a}  total_loss: {c}  lr: {d}",
        f"Epoch [{a}]  [ 0/10]  eta: 0:00:0{f[-1:]}  lr: {d}  loss: {c} ({e})  time: {b}",
    ]
    feed_all(log_format, lines)


def _is_count(text: str) -> bool:
    return 0.0 <= float(text) <= MAX_COUNTER


@SETTINGS
@given(step=NUMBERS, loss=NUMBERS, lr=NUMBERS)
def test_generic_line_numbers_follow_the_rules_exactly(step: str, loss: str, lr: str) -> None:
    # the oracle: a step that is no count makes the line unparsed; a loss keeps any value; an
    # infinite learning rate is left out and counted
    line = f"step={step} loss={loss} lr={lr}"
    parser = make_parser("generic")
    if not _is_count(step):
        with pytest.raises(ValueError, match="step"):
            parser.feed(line)
        return
    metric = parser.feed(line)
    assert metric is not None and metric.step == int(float(step))
    expected = [("train/loss", float(loss))]
    if not math.isinf(float(lr)):
        expected.append(("lr", float(lr)))
    assert _same(metric.values, expected)
    assert metric.unparsed_values == (1 if math.isinf(float(lr)) else 0)


@SETTINGS
@given(step=NUMBERS, epoch=NUMBERS, loss=NUMBERS, lr=NUMBERS)
def test_csv_row_numbers_follow_the_rules_exactly(
    step: str, epoch: str, loss: str, lr: str
) -> None:
    # in a CSV file a bad cell is an unparsed cell: the rest of the row is kept
    parser = make_parser("csv")
    assert parser.feed("epoch,step,train_loss,lr") is None
    metric = parser.feed(f"{epoch},{step},{loss},{lr}")
    bad_lr = math.isinf(float(lr))
    expected = [("train/loss", float(loss))] + ([] if bad_lr else [("lr", float(lr))])
    assert metric is not None and _same(metric.values, expected)
    assert metric.step == (int(float(step)) if _is_count(step) else None)
    assert metric.epoch == (float(epoch) if _is_count(epoch) else None)
    assert metric.unparsed_values == ((not _is_count(step)) + (not _is_count(epoch)) + bad_lr)


def _json_number(text: str) -> float:
    number = json.loads(text) if text not in ("nan", "inf", "-inf") else float(text)
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


JSON_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
).map(lambda number: json.dumps(number))  # NaN, Infinity and -Infinity tokens included


@SETTINGS
@given(step=JSON_NUMBERS, loss=JSON_NUMBERS, acc=JSON_NUMBERS)
def test_jsonl_numbers_follow_the_rules_exactly(step: str, loss: str, acc: str) -> None:
    line = f'{{"step": {step}, "loss": {loss}, "acc": {acc}}}'
    parser = make_parser("jsonl")
    step_value = _json_number(step)
    if not 0.0 <= step_value <= MAX_COUNTER:
        with pytest.raises(ValueError, match="step"):
            parser.feed(line)
        return
    metric = parser.feed(line)
    acc_value = _json_number(acc)
    expected = [("train/loss", _json_number(loss))]
    if not math.isinf(acc_value):
        expected.append(("train/acc", acc_value))
    assert metric is not None and metric.step == int(step_value)
    assert _same(metric.values, expected)
    assert metric.unparsed_values == (1 if math.isinf(acc_value) else 0)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@SETTINGS
@given(
    record=st.dictionaries(
        st.sampled_from(
            [
                "step",
                "epoch",
                "iter",
                "loss",
                "lr",
                "time",
                "mode",
                "",
                " ",
                "a\udc80",
                "iteration",
                "data_time",
                "grad_norm",
                "eval_loss",
            ]
        )
        | st.text(max_size=8),
        JSON_VALUES,
        max_size=6,
    )
)
@pytest.mark.parametrize("log_format", ["jsonl", "mmengine_json", "detectron2_json"])
def test_any_json_record_gives_a_valid_metric_none_or_value_error(
    log_format: str, record: dict
) -> None:
    feed_all(log_format, [json.dumps(record), json.dumps(record, ensure_ascii=False)])


@pytest.mark.parametrize("depth", [1, 63, 64, 100, 5000])
@pytest.mark.parametrize("log_format", ["jsonl", "mmengine_json", "detectron2_json"])
def test_json_nesting_is_bounded_before_decoding(log_format: str, depth: int) -> None:
    # the record's object is one level; `depth` more levels of arrays or objects inside
    for inner in ("[" * depth + "1" + "]" * depth, '{"a": ' * depth + "1" + "}" * depth):
        line = f'{{"iteration": 3, "lr": 0.1, "loss": 0.5, "x": {inner}}}'
        parser = make_parser(log_format)
        if depth + 1 > safe_json.MAX_DEPTH:
            with pytest.raises(ValueError, match="nested deeper than 64"):
                parser.feed(line)
        else:
            metric = parser.feed(line)
            assert metric is not None and ("train/loss", 0.5) in metric.values


@SETTINGS
@given(
    entries=st.lists(
        JSON_VALUES
        | st.dictionaries(
            st.sampled_from(["step", "epoch", "loss", "learning_rate", "grad_norm", "eval_loss"]),
            st.floats(allow_nan=True, allow_infinity=True)
            | st.integers(min_value=-(10**400), max_value=10**400),
            max_size=5,
        ),
        max_size=6,
    )
)
def test_any_trainer_state_document_gives_valid_metrics_or_value_error(entries: list) -> None:
    text = json.dumps({"log_history": entries})
    try:
        metrics = parse_trainer_state(text)
    except ValueError:
        return
    for metric in metrics:
        assert_valid(metric)


@pytest.mark.parametrize("depth", [61, 62, 500])
def test_trainer_state_nesting_is_bounded(depth: int) -> None:
    # the document object and log_history are two levels, the entry a third
    text = '{"log_history": [{"step": 1, "loss": 2.0, "x": ' + "[" * depth + "]" * depth + "}]}"
    if depth + 3 > safe_json.MAX_DEPTH:
        with pytest.raises(ValueError, match="nested deeper"):
            parse_trainer_state(text)
    else:
        [metric] = parse_trainer_state(text)
        assert metric.values == (("train/loss", 2.0),) and metric.step == 1


@SETTINGS
@given(line=LINES)
def test_scan_line_and_detection_never_fail(line: str) -> None:
    scan_line(line)
    assert detect_format([line, line]) in FORMAT_NAMES


@given(line=st.text(max_size=300) | st.lists(PIECES, max_size=60).map("".join))
def test_normalised_lines_are_short_and_free_of_control_sequences(line: str) -> None:
    out = normalise_line(line * 40)
    assert len(out) <= MAX_LINE_CHARS
    assert "\x1b[" not in out and "\b" not in out and "\r" not in out


def _same(got: tuple[tuple[str, float], ...], expected: list[tuple[str, float]]) -> bool:
    """Equal pairs, NaN equal to NaN."""
    return len(got) == len(expected) and all(
        name == want_name and (value == want or (math.isnan(value) and math.isnan(want)))
        for (name, value), (want_name, want) in zip(got, expected, strict=True)
    )

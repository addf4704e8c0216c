"""Odd lines give finite, sensible values or one ValueError, through `make_parser`'s boundary."""

from __future__ import annotations

import math

import pytest

from parsers.findings import findings_from_metric
from parsers.hf_trainer import read_trainer_state
from parsers.line_parser import CheckedParser
from parsers.model import LogMetric
from parsers.registry import detect_format, make_parser

INF, NAN = math.inf, math.nan
BIG = "1" + "0" * 400  # an integer beyond a float's range


@pytest.mark.parametrize(
    "line",
    [
        "step=inf loss=1",
        "step=1e309 loss=1",
        "step=-3 loss=1",
        "step=nan loss=1",
        "step=1" + "0" * 30 + " loss=1",  # a finite count, but far beyond 2**53
        "epoch=nan loss=1",
        "epoch=-inf loss=1",
        "epoch=1e99999 loss=1",
        "Epoch " + "9" * 400 + " | loss: 0.5",
    ],
)
def test_a_step_or_epoch_that_is_no_count_makes_the_line_unparsed(line: str) -> None:
    with pytest.raises(ValueError, match="step|epoch"):
        make_parser("generic").feed(line)


def _one(log_format: str, *lines: str) -> LogMetric:
    parser = make_parser(log_format)
    metrics = [parser.feed(line) for line in lines]
    metric = metrics[-1]
    assert metric is not None
    return metric


@pytest.mark.parametrize(
    ("line", "values", "left_out", "finding"),
    [
        ("step=3 loss=1e308", {"train/loss": 1e308}, 0, None),
        ("step=3 loss=1e-310", {"train/loss": 1e-310}, 0, None),  # subnormal, still finite
        ("step=3 loss=1e309", {"train/loss": INF}, 0, "inf"),  # overflows to Inf: a finding
        ("step=3 loss=-inf", {"train/loss": -INF}, 0, "inf"),
        ("step=3 loss=nan", {"train/loss": NAN}, 0, "nan"),
        ("step=3 loss=0.5 grad_norm=inf", {"train/loss": 0.5, "grad_norm": INF}, 0, None),
        # an infinite value that is not a loss is left out and counted, the rest kept
        ("step=3 loss=0.5 lr=inf", {"train/loss": 0.5}, 1, None),
        ("step=3 loss=0.5 lr=" + BIG, {"train/loss": 0.5}, 1, None),
        ("step=3 acc=nan loss=0.5", {"train/acc": NAN, "train/loss": 0.5}, 0, None),
        ("step=3 loss=0." + "0" * 9000 + "1", {"train/loss": 0.0}, 0, None),
        ("step=1e-99999 loss=2", {"train/loss": 2.0}, 0, None),  # step 0
    ],
)
def test_extreme_numbers_in_values(
    line: str, values: dict[str, float], left_out: int, finding: str | None
) -> None:
    metric = _one("generic", line)
    got = metric.as_dict()
    assert list(got) == list(values)
    assert all(got[k] == v or (math.isnan(got[k]) and math.isnan(v)) for k, v in values.items())
    assert metric.unparsed_values == left_out
    assert metric.step in (3, 0)
    kinds = [f.kind for f in findings_from_metric(metric)]
    assert kinds == ([finding] if finding else [])


def test_a_value_cut_by_the_search_window_is_read_whole() -> None:
    # the pair search stops 64 characters after the last separator; a long value used to be
    # read cut at that point (`lr=1` followed by 400 zeros gave 1e62)
    metric = _one("generic", "step=1 loss=0.5 lr=" + "1" + "0" * 100)
    assert metric.as_dict() == {"train/loss": 0.5, "lr": 1e100}


@pytest.mark.parametrize("line", ["lr=inf", "step=2 lr=-inf eta=" + BIG])
def test_a_line_with_no_value_left_is_unparsed(line: str) -> None:
    with pytest.raises(ValueError, match="no usable value"):
        make_parser("generic").feed(line)


def test_control_characters_invalid_utf8_and_a_10_mb_line() -> None:
    parser = make_parser("generic")
    assert parser.feed("step=5 loss=0.5\x00") == LogMetric((("train/loss", 0.5),), 5)
    assert parser.feed("step=6 loss=0.25 \udcff") == LogMetric((("train/loss", 0.25),), 6)
    garbage = b"step=7 loss=0.125 \xff\xfe\xed\xb3\xbf".decode("utf-8", errors="replace")
    assert parser.feed(garbage) == LogMetric((("train/loss", 0.125),), 7)
    huge = "step=8 loss=0.0625 " + "x" * (10 << 20)
    assert parser.feed(huge) == LogMetric((("train/loss", 0.0625),), 8)
    # 10 MB of digits: the line is cut at 10,000 characters, still more than a float holds
    metric = parser.feed("step=9 loss=" + "9" * (10 << 20))
    assert metric == LogMetric((("train/loss", INF),), 9)


@pytest.mark.parametrize(
    ("line", "values", "step", "left_out"),
    [
        ('{"step": 1, "loss": ' + BIG + "}", {"train/loss": INF}, 1, 0),
        ('{"step": 1, "loss": -' + BIG + "}", {"train/loss": -INF}, 1, 0),
        ('{"step": 1, "loss": 0.5, "lr": ' + BIG + "}", {"train/loss": 0.5}, 1, 1),
        ('{"step": 1, "loss": 0.5, "lr": 1e999}', {"train/loss": 0.5}, 1, 1),
        ('{"step": 2, "loss": NaN}', {"train/loss": NAN}, 2, 0),
        ('{"step": 2, "loss": Infinity}', {"train/loss": INF}, 2, 0),
        ('{"step": 3, "loss": 0.5, "": 7, " ": 8}', {"train/loss": 0.5}, 3, 2),
        ('{"step": 4, "loss": 0.5, "a\\udc80\\u0000b": 1}', {"train/loss": 0.5, "a??b": 1.0}, 4, 0),
        ('{"step": 5, "loss": 0.5, "time": 1714550400123}', {"train/loss": 0.5}, 5, 0),
    ],
)
def test_json_numbers_and_keys(
    line: str, values: dict[str, float], step: int, left_out: int
) -> None:
    metric = _one("jsonl", line)
    got = metric.as_dict()
    assert list(got) == list(values) and metric.step == step
    assert all(got[k] == v or (math.isnan(got[k]) and math.isnan(v)) for k, v in values.items())
    assert metric.unparsed_values == left_out


def test_json_milliseconds_become_seconds() -> None:
    metric = _one("jsonl", '{"step": 5, "loss": 0.5, "time": 1714550400123}')
    assert metric.taken_at == 1714550400.123


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('{"step": ' + BIG + ', "loss": 1}', "step inf"),
        ('{"step": -1, "loss": 1}', "step -1"),
        ('{"step": Infinity, "loss": 1}', "step inf"),
        ('{"epoch": NaN, "loss": 1}', "epoch nan"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + ', "loss": 1}', "nested deeper than 64"),
        ('{"loss": 1' + "0" * 5000 + "}", "digits"),  # Python's limit on integer strings
        ('{"loss": 0.5}\x00', "Extra data"),
        ('{"lr": 1e999}', "no usable value"),
    ],
)
def test_bad_json_lines_are_unparsed(line: str, error: str) -> None:
    for log_format in ("jsonl", "detectron2_json", "mmengine_json"):
        with pytest.raises(ValueError, match=error):
            make_parser(log_format).feed(line)


def test_a_deep_array_that_is_no_object_is_no_record() -> None:
    assert make_parser("jsonl").feed("[" * 100_000) is None


def test_zero_seconds_per_iteration_gives_no_rate_instead_of_failing() -> None:
    # tqdm, Keras, Rich and YOLO print `0.00s/it` or `0us/step` when a step is too fast to time
    tqdm = _one("tqdm", "Epoch 0:  50%|█████     | 5/10 [00:01<00:01, 0.00s/it, loss=0.5]")
    assert tqdm.as_dict() == {"train/loss": 0.5} and tqdm.epoch == 0.0  # an epoch's bar: no ETA
    keras = _one("keras", "Epoch 2/3", "12/12 ━━━━━━━━━━━━━━━━━━━━ 0s 0us/step - loss: 0.5")
    assert keras.as_dict() == {"train/loss": 0.5} and keras.epoch == 2.0
    rich = _one(
        "lightning_rich", "Epoch 3/3  ━━━━━━━━━━━━ 5/10 0:00:01 • 0:00:01 0.00s/it loss: 0.5"
    )
    assert rich.as_dict() == {"eta_s": 1.0, "train/loss": 0.5}  # the last epoch's bar
    header = "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size"
    row = (
        "        1/2         0G      2.693      2.023      1.734          8         64: 50% "
        "━━━━━━────── 1/2 0.00s/it 0.3s<0.4s"
    )
    yolo = _one("ultralytics", "Ultralytics 8.4.190", header, row)
    assert yolo.as_dict() == {
        "gpu_mem_gb": 0.0,
        "train/box_loss": 2.693,
        "train/cls_loss": 2.023,
        "train/dfl_loss": 1.734,
    }


def test_a_keras_epoch_that_is_no_count_is_unparsed_and_forgotten() -> None:
    parser = make_parser("keras")
    parser.feed("Epoch 2/3")
    with pytest.raises(ValueError, match="epoch"):
        parser.feed("Epoch " + "9" * 400 + "/3")
    metric = parser.feed("12/12 ━━━━━━━━━━━━━━━━━━━━ 0s 5ms/step - loss: 0.5")
    assert metric is not None and metric.epoch is None  # not epoch 2, not Inf


class _Raises:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def feed(self, line: str) -> LogMetric | None:
        raise self.error

    def reset(self) -> None:
        pass


@pytest.mark.parametrize(
    "error",
    [
        OverflowError("cannot convert float infinity to integer"),
        ZeroDivisionError("float division by zero"),
        IndexError("list index out of range"),
        KeyError("x"),
        RecursionError("maximum recursion depth exceeded"),
    ],
)
def test_the_boundary_turns_bad_input_failures_into_value_error(error: BaseException) -> None:
    with pytest.raises(ValueError, match=type(error).__name__) as raised:
        CheckedParser(_Raises(error)).feed("x")
    assert raised.value.__cause__ is error


def test_the_boundary_does_not_hide_programming_errors() -> None:
    # a TypeError or AttributeError is a bug in a parser, not bad input: it is not counted
    # away as an unparsed line
    for error in (TypeError("bug"), AttributeError("bug")):
        with pytest.raises(type(error)):
            CheckedParser(_Raises(error)).feed("x")


def test_csv_bad_cells_are_unparsed_cells_never_a_new_header() -> None:
    parser = make_parser("csv")
    assert parser.feed("epoch,step,train_loss,lr") is None
    assert parser.feed("0,10,0.5,0.1") == LogMetric((("train/loss", 0.5), ("lr", 0.1)), 10, 0.0)
    # missing-value words are empty cells: skipped, not counted
    assert parser.feed("1,20,None,0.1") == LogMetric((("lr", 0.1),), 20, 1.0)
    assert parser.feed("1,21,N/A,-") is None
    assert parser.feed("1,22,NA,null") is None
    # anything else that is not a number is an unparsed cell; the good cells are kept
    assert parser.feed("2,30,tensor(1.2),0.1") == LogMetric((("lr", 0.1),), 30, 2.0, None, 1)
    assert parser.feed("x,inf,0.4,abc") == LogMetric((("train/loss", 0.4),), None, None, None, 3)
    with pytest.raises(ValueError, match="2 cell"):
        parser.feed("3,40,tensor(1.2),oops")  # no usable cell at all
    with pytest.raises(ValueError, match="4 cell"):
        parser.feed("loss,acc,foo,bar")  # text only: not a header, an unparsed row
    assert parser.feed("epoch,step,train_loss,lr") is None  # the header repeated
    # and later rows still have the first header's names
    assert parser.feed("4,50,0.25,0.01") == LogMetric((("train/loss", 0.25), ("lr", 0.01)), 50, 4.0)


def test_pandas_to_csv_index_column_is_ignored() -> None:
    parser = make_parser("csv")
    assert parser.feed(",epoch,train_loss,val_acc") is None
    metric = parser.feed("0,0,2.3,")
    assert metric == LogMetric((("train/loss", 2.3),), None, 0.0)
    metric = parser.feed("1,1,1.5,0.22")
    assert metric == LogMetric((("train/loss", 1.5), ("val/acc", 0.22)), None, 1.0)


def test_a_byte_order_mark_does_not_hide_the_first_column() -> None:
    lines = ["\ufeffepoch,step,train_loss", "0,9,0.5"]
    assert detect_format(lines, "metrics.csv") == "lightning_csv"
    assert _one("lightning_csv", *lines) == LogMetric((("train/loss", 0.5),), 9, 0.0)


def test_trainer_state_entries_that_are_no_metric_are_counted() -> None:
    text = (
        '{"log_history": [{"step": 1, "loss": 2.0}, {"step": -1, "loss": 1.5},'
        ' {"step": 3, "loss": ' + BIG + '}, {"step": 4, "learning_rate": Infinity},'
        ' {"step": 5, "loss": 1.0, "learning_rate": -Infinity}, "x", {"note": "y"}]}'
    )
    metrics, unparsed = read_trainer_state(text)
    assert [(m.step, m.as_dict(), m.unparsed_values) for m in metrics] == [
        (1, {"train/loss": 2.0}, 0),
        (3, {"train/loss": INF}, 0),
        (5, {"train/loss": 1.0}, 1),
    ]
    assert [number for number, _ in unparsed] == [2, 4]
    assert "step -1" in unparsed[0][1] and "no usable value" in unparsed[1][1]

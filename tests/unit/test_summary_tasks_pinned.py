"""The per-task and per-GPU sections of a summary, exactly, key by key.

Cases found by mutation testing (benchmarks/mutation.py) that the other summary tests let
through: the task order, the first and last times and the rounding of a task's duration and
rate, the throughput block, the rate at its edges (two rows, under a second, a step counter
that restarts or stands still), a metric with no finite value, -inf and 2**53, sums past the
largest float, and a GPU that is in no `meta.json` entry, has no memory reading or no total.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gpuherd.summary import report
from gpuherd.summary.summary import summarize
from tests.unit.test_summary import GIB, H200_TOTAL, T0, gpu_row, write_session

TASK_ROWS = [
    f"{T0 + 5},train,1,train/loss,4.0,10,0",
    f"{T0 + 6},train,2,throughput/it_s,2.0,10,0",
    f"{T0 + 7},train,3,train/loss,inf,20,0",
    f"{T0 + 8},train,4,train/loss,1.0,30,1",
    f"{T0 + 9},train,5,throughput/it_s,4.5,30,1",
    f"{T0 + 10},eval,7,val/acc,0.5,,1",
    f"{T0 + 11.23456},train,6,train/loss,2.5,50,1",
    f"{T0 + 12},eval,8,val/acc,0.75,,2",
    f"{T0 + 13},eval,9,val/acc,nan,,2",
    # Rows with an empty task or metric are skipped (and counted) by the session reader: they
    # must not stretch train's times or steps, nor make a task of their own.
    f"{T0 + 14},,10,train/loss,9,60,2",
    f"{T0 + 30},train,11,,7,70,3",
    f"{T0 + 31},ghost,12,,1,,",
]


def test_each_task_exactly_in_the_order_it_first_logged(tmp_path: Path) -> None:
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], metrics=TASK_ROWS)
    tasks = summarize(root).data["tasks"]
    # train logged first, so it comes first although "eval" sorts before it
    assert [t["task"] for t in tasks] == ["train", "eval"]
    train, evaluation = tasks
    assert train == {
        "task": "train",
        "first_t": T0 + 5,
        "last_t": T0 + 11.23456,
        "duration_s": 6.235,  # 6.23456 s to a thousandth
        "steps": {"first": 10, "last": 50},
        "epochs": {"first": 0, "last": 1},
        "steps_per_s": 6.4158,  # (50 - 10) / 6.23456 = 6.415849...
        "metrics": {
            "train/loss": {
                "first": 4,
                "last": 2.5,
                "best": 1,
                "best_is": "min",
                "first_step": 10,
                "last_step": 50,
                "count": 4,
                "nonfinite": 1,
                "mean": 2.5,
            },
            "throughput/it_s": {
                "first": 2,
                "last": 4.5,
                "best": None,
                "best_is": None,
                "first_step": 10,
                "last_step": 30,
                "count": 2,
                "nonfinite": 0,
                "mean": 3.25,
            },
        },
        "throughput": {"throughput/it_s": {"mean": 3.25, "last": 4.5}},
    }
    assert evaluation == {
        "task": "eval",
        "first_t": T0 + 10,
        "last_t": T0 + 13,
        "duration_s": 3,
        "steps": {"first": None, "last": None},
        "epochs": {"first": 1, "last": 2},
        "steps_per_s": None,
        "metrics": {
            "val/acc": {
                "first": 0.5,
                "last": "nan",
                "best": 0.75,
                "best_is": "max",
                "first_step": None,
                "last_step": None,
                "count": 3,
                "nonfinite": 1,
                "mean": 0.625,
            },
        },
        "throughput": {},
    }
    assert isinstance(train["first_t"], int) and isinstance(train["last_t"], float)


@pytest.mark.parametrize(
    ("rows", "rate"),
    [
        # two stepped rows are enough, and half a second is a rate
        ([(0.0, 10), (0.5, 20)], 20.0),
        ([(0.0, 10), (3.0, 25)], 5.0),
        # one stepped row: no rate
        ([(0.0, 10)], None),
        # the counter stood still, or restarted: no rate rather than 0 or a negative one
        ([(0.0, 100), (2.0, 100)], None),
        ([(0.0, 100), (2.0, 50)], None),
        # three rows: the first and the last count, 40 steps in 6 s to four places
        ([(0.0, 10), (1.0, 49), (6.0, 50)], 6.6667),
    ],
)
def test_the_steps_per_second_at_its_edges(
    tmp_path: Path, rows: list[tuple[float, int]], rate: float | None
) -> None:
    metrics = [
        f"{T0 + 1 + dt},train,{n},train/loss,1.0,{step},0" for n, (dt, step) in enumerate(rows)
    ]
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], metrics=metrics)
    [task] = summarize(root).data["tasks"]
    assert task["steps_per_s"] == rate


def test_a_gpu_missing_from_meta_and_the_first_rows_has_empty_names(tmp_path: Path) -> None:
    # gpu.csv names GPUs in its first 256 rows; GPU 1 shows up later and meta.json lacks it
    rows = [gpu_row(T0 + i / 100, 0, GIB, 5) for i in range(256)]
    rows.append(gpu_row(T0 + 3, 1, 2 * GIB, 50, uuid="GPU-late"))
    gpus = summarize(write_session(tmp_path / "s", gpu_rows=rows)).data["gpus"]
    assert [(g["index"], g["uuid"], g["name"]) for g in gpus] == [
        (0, "GPU-aaaa", "NVIDIA H200"),
        (1, "", ""),
    ]
    assert gpus[1]["peak_mem_bytes"] == 2 * GIB


def test_a_gpu_without_a_memory_reading_has_no_peak(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + i, 0, GIB, 5) for i in range(3)]
    # GPU 1 reports a total but never a used amount (no used cell, no fast peak)
    rows += [
        gpu_row(T0 + i, 1, 0, 70, uuid="GPU-bbbb").replace(",0,150754820096,", ",,150754820096,")
        for i in range(3)
    ]
    gpus = summarize(write_session(tmp_path / "s", gpu_rows=rows)).data["gpus"]
    assert gpus[1] == {
        "index": 1,
        "uuid": "GPU-bbbb",
        "name": "NVIDIA H200",
        "mem_total_bytes": H200_TOTAL,
        "peak_mem_bytes": None,
        "peak_mem_gib": None,
        "peak_mem_pct": None,
        "peak_at": None,
        "peak_at_elapsed_s": None,
        "util_mean_pct": 70,
        "util_p95_pct": 70,
        "temp_max_c": 40,
        "power_max_w": 100,
    }


def test_an_unknown_memory_total_is_null_not_the_string_nan(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + i, 0, (i + 1) * GIB, 5).replace(f",{H200_TOTAL},", ",,") for i in range(3)]
    summary = summarize(write_session(tmp_path / "s", gpu_rows=rows))
    gpu = summary.data["gpus"][0]
    assert (gpu["mem_total_bytes"], gpu["peak_mem_bytes"], gpu["peak_mem_pct"]) == (
        None,
        3 * GIB,
        None,
    )
    assert json.loads(report.render_json(summary))["gpus"][0]["mem_total_bytes"] is None


def test_a_metric_that_never_had_a_finite_value_has_no_mean_and_no_best(tmp_path: Path) -> None:
    metrics = [
        f"{T0 + 1},train,1,val/loss,nan,10,0",
        f"{T0 + 2},train,2,val/loss,inf,20,0",
        f"{T0 + 3},train,3,val/loss,nan,30,0",
        f"{T0 + 1},train,4,lr,0.1,10,0",
    ]
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], metrics=metrics)
    [task] = summarize(root).data["tasks"]
    assert task["metrics"]["val/loss"] == {
        "first": "nan",
        "last": "nan",
        "best": None,
        "best_is": "min",
        "first_step": 10,
        "last_step": 30,
        "count": 3,
        "nonfinite": 3,
        "mean": None,
    }


def test_infinities_and_integers_beyond_two_to_the_53_keep_their_json_form(tmp_path: Path) -> None:
    # -inf is "-inf", not "inf"; 2**53 is a float (JSON readers may not hold it exactly as an
    # integer), 2**53 - 1 an integer
    metrics = [
        f"{T0 + 1},train,1,grad_norm,-inf,1,0",
        f"{T0 + 2},train,2,grad_norm,{2**53},2,0",
        f"{T0 + 3},train,3,grad_norm,{2**53 - 1},3,0",
        f"{T0 + 1},train,4,score,inf,1,0",
        f"{T0 + 2},train,5,score,-1e400,2,0",
    ]
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], metrics=metrics)
    [task] = summarize(root).data["tasks"]
    norm, score = task["metrics"]["grad_norm"], task["metrics"]["score"]
    assert (norm["first"], norm["last"], norm["nonfinite"]) == ("-inf", 2**53 - 1, 1)
    assert norm["mean"] == 2**53 and isinstance(norm["mean"], float)
    assert isinstance(norm["last"], int)
    assert (score["first"], score["last"], score["nonfinite"], score["mean"]) == (
        "inf",
        "-inf",
        2,
        None,
    )


BIG = 1.7976931348623157e308


@pytest.mark.parametrize(
    ("values", "mean"),
    [
        ([1e308, BIG], "inf"),  # the sum overflows
        ([BIG, BIG, -BIG, -BIG] * 5, "nan"),  # partial sums of inf and -inf meet
    ],
)
def test_sums_past_the_largest_float_read_as_such_without_a_numpy_warning(
    tmp_path: Path, values: list[float], mean: str
) -> None:
    metrics = [f"{T0 + 1 + i},train,{i},grad_norm,{v!r},{i},0" for i, v in enumerate(values)]
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], metrics=metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would print on the user's stderr
        summary = summarize(root)
    [task] = summary.data["tasks"]
    assert task["metrics"]["grad_norm"]["mean"] == mean
    assert task["metrics"]["grad_norm"]["nonfinite"] == 0

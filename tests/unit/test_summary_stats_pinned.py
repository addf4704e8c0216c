"""The statistics rows of a summary, exactly: which rows exist, their units, and their JSON.

Cases found by mutation testing (benchmarks/mutation.py) that the other summary tests let
through: a row for a column with no value, the unit of a throughput, the p95 of a log metric,
task/metric pairs that never occurred, the rounding and the JSON form of each statistic, and an
unfinished session without GPU rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from collectors.session.session_format import HOST_FILE, HOST_WRITTEN
from gpuherd.summary.stats import STAT_COLUMNS, stats_records
from gpuherd.summary.summary import summarize
from tests.unit.test_summary import GIB, H200_TOTAL, T0, gpu_row, write_session


def stats_of(root: Path) -> dict[str, dict]:
    return {row["key"]: row for row in summarize(root).data["stats"]}


def test_statistics_round_to_four_places_and_name_what_json_cannot_hold() -> None:
    frame = pd.DataFrame(
        {
            "count": [3, 1, 2],
            "mean": [300 / 11, math.inf, 9007199254740991.0],
            "min": [0.0, -math.inf, 1.23456789],
            "max": [100.0, math.nan, -0.123456],
            "p95": [12.345678, 2.0**53, 5.0],
            "unit": ["%", "", "GiB"],
        },
        index=["gpu0/util_gpu (%)", "command/loss", "host/mem_used (GiB)"],
    )
    rows = stats_records(frame)
    assert rows == [
        {
            "key": "gpu0/util_gpu (%)",
            "count": 3,
            "mean": 27.2727,
            "min": 0,
            "max": 100,
            "p95": 12.3457,
            "unit": "%",
        },
        {
            "key": "command/loss",
            "count": 1,
            "mean": "inf",
            "min": "-inf",
            "max": None,
            "p95": 9007199254740992.0,
            "unit": "",
        },
        {
            "key": "host/mem_used (GiB)",
            "count": 2,
            "mean": 9007199254740991,
            "min": 1.2346,
            "max": -0.1235,
            "p95": 5,
            "unit": "GiB",
        },
    ]
    # whole numbers below 2**53 are JSON integers; 2**53 itself may not be exact, so a float
    assert [
        type(rows[0]["min"]),
        type(rows[1]["p95"]),
        type(rows[2]["mean"]),
        type(rows[2]["p95"]),
    ] == [int, float, int, int]
    json.dumps(rows, allow_nan=False)


def test_a_column_without_a_value_has_no_row_and_one_value_has_a_row(tmp_path: Path) -> None:
    # power_w is empty on every row; the temperature is known on one row only
    rows = [
        gpu_row(T0 + i, 0, GIB, 50).replace(",40,100,", f",{'55' if i == 1 else ''},,")
        for i in range(3)
    ]
    stats = stats_of(write_session(tmp_path / "s", gpu_rows=rows))
    assert "gpu0/power (W)" not in stats
    assert stats["gpu0/temp (C)"] == {
        "key": "gpu0/temp (C)",
        "count": 1,
        "mean": 55,
        "min": 55,
        "max": 55,
        "p95": 55,
        "unit": "C",
    }


def test_log_metric_rows_have_their_unit_p95_and_no_pairs_that_never_occurred(
    tmp_path: Path,
) -> None:
    metrics = [f"{T0 + i},command,{i + 1},throughput/it_s,{10.0 * (i + 1)},{i},0" for i in range(4)]
    metrics += [
        f"{T0 + 1},/runs/b.log,1,val/acc,0.5,1,0",
        f"{T0 + 2},/runs/b.log,2,val/acc,0.7,2,0",
    ]
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 50)], metrics=metrics)
    stats = stats_of(root)
    assert stats["command/throughput/it_s (it/s)"] == {
        "key": "command/throughput/it_s (it/s)",
        "count": 4,
        "mean": 25,
        "min": 10,
        "max": 40,
        "p95": 38.5,
        "unit": "it/s",
    }
    assert stats["/runs/b.log/val/acc"]["p95"] == 0.69
    # not "command/val/acc" nor "/runs/b.log/throughput/it_s": only pairs the log holds
    assert sorted(k for k in stats if not k.startswith("gpu0/")) == [
        "/runs/b.log/val/acc",
        "command/throughput/it_s (it/s)",
    ]


def test_an_unfinished_session_without_gpu_rows_summarizes_its_host(tmp_path: Path) -> None:
    root = write_session(tmp_path / "s", gpu_rows=[], meta={"ended_at": None})
    (root / HOST_FILE).write_text(
        "\n".join(
            [",".join(HOST_WRITTEN)]
            + [f"{T0 + i},{10 * (i + 1)},{GIB},{64 * GIB}" for i in range(3)]
        )
        + "\n"
    )
    data = summarize(root).data
    assert data["window"] == {"start": T0, "end": None, "source": "session"}
    assert data["gpus"] == []
    host = {row["key"]: row for row in data["stats"]}["host/cpu (%)"]
    assert (host["count"], host["mean"], host["min"], host["max"]) == (3, 20, 10, 30)


def test_the_statistics_frame_is_indexed_by_key_even_when_empty(tmp_path: Path) -> None:
    stats = summarize(write_session(tmp_path / "s", gpu_rows=[])).stats
    assert stats.empty and stats.index.name == "key"
    assert list(stats.columns) == list(STAT_COLUMNS)
    full = summarize(write_session(tmp_path / "t", gpu_rows=[gpu_row(T0, 0, GIB, 50)])).stats
    assert full.index.name == "key" and list(full.columns) == list(STAT_COLUMNS)


@pytest.mark.parametrize("util", ["0", "100"])
def test_one_reading_is_its_own_mean_min_max_and_p95(tmp_path: Path, util: str) -> None:
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, float(util))])
    row = stats_of(root)["gpu0/util_gpu (%)"]
    value = int(util)
    assert (row["count"], row["mean"], row["min"], row["max"], row["p95"]) == (
        1,
        value,
        value,
        value,
        value,
    )


def test_a_gpu_peak_rounds_to_a_thousandth_of_a_gib_and_of_a_second(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + 0.5, 0, GIB, 50), gpu_row(T0 + 1.23456, 0, 1.23456789 * GIB, 60)]
    gpu = summarize(write_session(tmp_path / "s", gpu_rows=rows)).data["gpus"][0]
    assert (
        gpu["peak_mem_bytes"],
        gpu["peak_mem_gib"],
        gpu["peak_mem_pct"],
        gpu["peak_at_elapsed_s"],
    ) == (1325607178, 1.235, 0.88, 1.235)
    # The total unknown on every row: no percentage rather than NaN.
    unknown = [r.replace(f",{H200_TOTAL},", ",,") for r in rows]
    gpu = summarize(write_session(tmp_path / "u", gpu_rows=unknown)).data["gpus"][0]
    assert (gpu["peak_mem_gib"], gpu["peak_mem_pct"]) == (1.235, None)

"""The recall benchmark's matching: a value counts as found only when the parse really has it."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

from tests.unit.test_parsers_hand_read import Read

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_parse_recall.py"
_spec = importlib.util.spec_from_file_location("bench_parse_recall", SCRIPT)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_parse_recall"] = bench
_spec.loader.exec_module(bench)

RECORDS = [
    {"line": 3, "metric": "train/loss", "value": 0.5, "step": 30, "epoch": 1},
    {"line": 3, "metric": "lr", "value": 0.001, "step": 30, "epoch": 1},
    {"line": 4, "metric": "val/map", "value": "nan", "epoch": 1},
]


def test_a_missing_value_is_counted_as_missing() -> None:
    reads = [Read(3, "train/loss", 0.5, step=30), Read(3, "val/loss", 0.7)]
    assert bench.recall(reads, RECORDS) == (1, 2)
    assert bench.recall(reads, []) == (0, 2)


def test_the_line_the_value_and_the_step_or_epoch_must_all_agree() -> None:
    assert bench.found(Read(3, "train/loss", 0.5, step=30, epoch=1), RECORDS)
    assert not bench.found(Read(2, "train/loss", 0.5), RECORDS)  # another line
    assert not bench.found(Read(3, "train/loss", 0.5000001), RECORDS)  # another value
    assert not bench.found(Read(3, "train/loss", 0.5, step=31), RECORDS)  # another step
    assert not bench.found(Read(3, "train/loss", 0.5, epoch=2), RECORDS)  # another epoch
    assert not bench.found(Read(4, "val/map", 0.0, step=40), RECORDS)  # no step at all


def test_nan_matches_nan_only_and_near_equal_values_match() -> None:
    assert bench.found(Read(4, "val/map", math.nan), RECORDS)
    assert not bench.found(Read(4, "val/map", 0.0), RECORDS)
    assert bench.found(Read(3, "lr", 0.001 * (1 + 1e-12)), RECORDS)
    assert bench.same_value(math.inf, math.inf) and not bench.same_value(math.inf, -math.inf)


def test_the_table_has_one_row_per_format_and_the_overall_share() -> None:
    rows = bench.table({"csv": [3, 4], "jsonl": [2, 2]})
    assert rows[2:] == [
        "| `csv` | 3 / 4 | 75.0 % |",
        "| `jsonl` | 2 / 2 | 100.0 % |",
        "| **overall** | 5 / 6 | 83.3 % |",
    ]

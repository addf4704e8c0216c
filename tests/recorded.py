"""Helpers for tests that run a real recorder: wait for a condition, read what it recorded."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path


def wait_until(predicate: Callable[[], object], timeout_s: float = 20.0) -> None:
    """Poll `predicate` until it is true; `AssertionError` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def loss_steps(root: Path, task: str | None = None) -> list[int]:
    """The step of every `train/loss` row of `metrics.csv` in `root` (of one task if given)."""
    with open(root / "metrics.csv", newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            return []
        # by column index: `csv.DictReader` made a dict a row, most of reading a million rows
        step, metric = header.index("step"), header.index("metric")
        task_at = None if task is None else header.index("task")
        return [
            int(r[step])
            for r in rows
            if len(r) == len(header)
            and r[metric] == "train/loss"
            and (task_at is None or r[task_at] == task)
        ]

"""MLflow's metric rows to points: the per-row work of reading its SQLite store.

This module is compiled with mypyc in a built wheel (`hatch_build.py`), as `parsers/` is:
every row read from an `mlflow.db` passes through it.
"""

from __future__ import annotations

import math
from typing import Any, Final

from parsers.model import LogMetric
from parsers.text import metric_name

_MAX_DOUBLE: Final = 1.7976931348623157e308


def metric_value(value: float, is_nan: int) -> float:
    """The value MLflow was given: NaN for `is_nan`, infinities for the clamped doubles."""
    if is_nan:
        return math.nan
    if value >= _MAX_DOUBLE:
        return math.inf
    if value <= -_MAX_DOUBLE:
        return -math.inf
    return float(value)


def sqlite_points(
    rows: list[tuple[Any, ...]], names: dict[str, str], metrics: list[LogMetric]
) -> None:
    """One `LogMetric` per row of `metrics` (rowid, key, value, timestamp, step, is_nan).

    Args:
        rows: the rows, as the SQLite module gives them.
        names: the metric name of each key seen in the run, filled as keys come.
        metrics: where the points go, in the rows' order.
    """
    for _rowid, key, value, stamp, step, is_nan in rows:
        if is_nan or not -_MAX_DOUBLE < value < _MAX_DOUBLE:
            value = metric_value(value, is_nan)
        name = names.get(key)
        if name is None:
            name = names[key] = metric_name(key)
        # positional: the keyword call costs more, once per point
        metrics.append(LogMetric(((name, value),), step, None, stamp / 1000.0))

"""The statistics table of a summary: one row per (scope, metric), nvitop-style keys."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from gpuherd.present.format import GIB
from gpuherd.summary.frames import SessionFrames
from parsers.vocabulary import UNITS

STAT_COLUMNS = ("count", "mean", "min", "max", "p95", "unit")

# gpu.csv column -> (stat metric name, unit, scale)
GPU_STATS = (
    ("mem_used_bytes", "mem_used", "GiB", 1 / GIB),
    ("mem_best", "mem_peak", "GiB", 1 / GIB),
    ("util_gpu_pct", "util_gpu", "%", 1.0),
    ("util_mem_pct", "util_mem", "%", 1.0),
    ("temp_c", "temp", "C", 1.0),
    ("power_w", "power", "W", 1.0),
)
HOST_STATS = (
    ("cpu_pct", "cpu", "%", 1.0),
    ("mem_used_bytes", "mem_used", "GiB", 1 / GIB),
)
CONTAINER_STATS = (
    ("cpu_pct", "cpu", "%", 1.0),
    ("mem_used_bytes", "mem_used", "GiB", 1 / GIB),
    ("gpu_mem_bytes", "gpu_mem", "GiB", 1 / GIB),
)
SHORT_ID = 12


def stat_key(scope: str, metric: str, unit: str) -> str:
    """The statistics row key, nvitop style: `gpu0/util_gpu (%)`; no parentheses when unitless."""
    return f"{scope}/{metric} ({unit})" if unit else f"{scope}/{metric}"


def container_labels(frame: pd.DataFrame) -> dict[str, str]:
    """Container id -> how it is named in a summary: its last recorded name.

    A name two containers had (one removed, another started under its name) gets the short id
    added, `trainer@3f9a2c41d0e7`, so each keeps a line of its own.
    """
    names: dict[str, str] = {}
    for cid, rows in frame.groupby("id", observed=True, sort=False):
        known = rows["name"].dropna()
        names[str(cid)] = str(known.iloc[-1]) if len(known) else str(cid)[:SHORT_ID]
    taken = pd.Series(list(names.values())).value_counts()
    return {
        cid: name if taken[name] == 1 else f"{name}@{cid[:SHORT_ID]}" for cid, name in names.items()
    }


def in_window(frame: pd.DataFrame, window: dict[str, Any]) -> pd.DataFrame:
    """The rows of `frame` whose `t` falls inside the window (all rows when it is open)."""
    start, end = window["start"], window["end"]
    if start is None or end is None:
        return frame
    return frame[(frame["t"] >= start) & (frame["t"] <= end)]


def _round(value: Any, digits: int) -> Any:
    """A statistic for JSON: NaN is `None`, an infinity (a sum past 1e308) the string."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    value = round(value, digits)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def stats_frame(frames: SessionFrames, gpu: pd.DataFrame, window: dict[str, Any]) -> pd.DataFrame:
    """One row per (scope, metric) over the task window: count, mean, min, max, p95, unit.

    `gpu` is `frames.gpu` with the `mem_best` column (the row's peak) added.
    """
    parts = [_grouped_stats(in_window(gpu, window), "gpu", lambda i: f"gpu{int(i)}", GPU_STATS)]
    if frames.host is not None and not frames.host.empty:
        host = in_window(frames.host, window).assign(scope="host")
        parts.append(_grouped_stats(host, "scope", str, HOST_STATS))
    if frames.containers is not None and not frames.containers.empty:
        labels = container_labels(frames.containers)
        parts.append(
            _grouped_stats(
                in_window(frames.containers, window),
                "id",
                lambda i: f"container:{labels[str(i)]}",
                CONTAINER_STATS,
            )
        )
    if frames.metrics is not None and not frames.metrics.empty:
        parts.append(_metric_stats(frames.metrics))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=list(STAT_COLUMNS)).rename_axis("key")
    return pd.concat(parts).rename_axis("key")


def _grouped_stats(
    frame: pd.DataFrame, by: str, scope: Any, columns: tuple[tuple[str, str, str, float], ...]
) -> pd.DataFrame:
    """All `columns` of `frame` per `by` group in one groupby pass, one row per (group, column)."""
    names = [c for c, _, _, _ in columns]
    grouped = frame.groupby(by, observed=True)[names]
    agg = grouped.agg(["count", "mean", "min", "max"])
    p95 = grouped.quantile(0.95)
    out = []
    for column, metric, unit, scale in columns:
        table = agg[column].copy()
        table["p95"] = p95[column]
        table = table[table["count"] > 0]
        for col in ("mean", "min", "max", "p95"):
            table[col] = table[col] * scale
        table["unit"] = unit
        table.index = [stat_key(scope(i), metric, unit) for i in table.index]
        out.append(table)
    return pd.concat(out) if out else pd.DataFrame()


def _metric_stats(metrics: pd.DataFrame) -> pd.DataFrame:
    finite = metrics[np.isfinite(metrics["value"])]
    if finite.empty:
        return pd.DataFrame()
    grouped = finite.groupby(["task", "metric"], observed=True)["value"]
    table = grouped.agg(["count", "mean", "min", "max"])
    table["p95"] = grouped.quantile(0.95)
    units = [UNITS.get(str(m), "") for _, m in table.index]
    table["unit"] = units
    pairs = zip(table.index, units, strict=True)
    table.index = [stat_key(str(t), str(m), u) for (t, m), u in pairs]
    return table


def stats_records(stats: pd.DataFrame) -> list[dict[str, Any]]:
    """The statistics frame as JSON-ready rows."""
    return [
        {
            "key": key,
            "count": int(row["count"]),
            "mean": _round(row["mean"], 4),
            "min": _round(row["min"], 4),
            "max": _round(row["max"], 4),
            "p95": _round(row["p95"], 4),
            "unit": row["unit"],
        }
        for key, row in stats.iterrows()
    ]

"""Per-container figures of a summary: peak GPU memory and CPU, from `containers.csv`."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from collectors.session.session_format import META
from gpuherd.summary.frames import SessionFrames
from gpuherd.summary.stats import GIB, container_labels, in_window


def container_summary(frames: SessionFrames, window: dict[str, Any]) -> list[dict[str, Any]]:
    """Per container, by name: when it ran, its peak GPU memory (and when), CPU and memory.

    Peaks cover the whole session; CPU mean and p95 cover the window (the command's run when
    there is one), as GPU utilization does.
    """
    frame = frames.containers
    if frame is None or frame.empty:
        return []
    labels = container_labels(frame)
    started = frames.meta.get(META.started_at)
    busy = in_window(frame, window).groupby("id", observed=True)["cpu_pct"]
    cpu_mean, cpu_p95 = busy.mean(), busy.quantile(0.95)
    out = []
    for cid, rows in frame.groupby("id", observed=True, sort=False):
        cid = str(cid)
        gpu = rows["gpu_mem_bytes"].dropna()
        peak_at = float(rows.loc[gpu.idxmax(), "t"]) if len(gpu) else None
        images = rows["image"].dropna()
        out.append(
            {
                "id": cid,
                "name": labels[cid],
                "image": str(images.iloc[-1]) if len(images) else None,
                "first_t": _num(rows["t"].min()),
                "last_t": _num(rows["t"].max()),
                "gpu_mem_peak_bytes": _num(gpu.max()) if len(gpu) else None,
                "gpu_mem_peak_gib": round(float(gpu.max()) / GIB, 3) if len(gpu) else None,
                "gpu_mem_peak_at": peak_at,
                "gpu_mem_peak_at_elapsed_s": (
                    None
                    if peak_at is None or not _is_num(started)
                    else round(peak_at - float(started), 3)
                ),
                "cpu_mean_pct": _num(cpu_mean.get(cid), 2),
                "cpu_p95_pct": _num(cpu_p95.get(cid), 2),
                "cpu_max_pct": _num(rows["cpu_pct"].max(), 2),
                "mem_peak_bytes": _num(rows["mem_used_bytes"].max()),
                "mem_limit_bytes": _num(
                    rows["mem_limit_bytes"].dropna().iloc[-1]
                    if rows["mem_limit_bytes"].notna().any()
                    else None
                ),
            }
        )
    return sorted(out, key=lambda c: (c["name"], c["id"]))


def _is_num(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value: Any, digits: int | None = None) -> Any:
    """A figure for JSON: NaN is `None`, whole numbers are integers."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    if digits is not None:
        value = round(value, digits)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value

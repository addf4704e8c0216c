"""Plain-text plotext charts of VRAM and loss for `summary.md`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotext
from plotext._figure import _figure_class as PlotextFigure  # plotext 5.x, pinned in pyproject

from collectors.session.session_format import META
from gpuherd.present.chart_values import drawable as fit
from gpuherd.present.chart_values import nice_ticks, spread_repeats, tick_labels
from gpuherd.present.format import GIB
from gpuherd.summary.frames import SessionFrames
from parsers.vocabulary import LOSS_CHART

MARKERS = ("•", "x", "+", "o", "*", "#", "@", "%")
"""One marker per line: the Markdown copy has no colours to tell lines apart."""
MAX_POINTS = 400
"""Lines are reduced to this many points; VRAM keeps each bucket's maximum so peaks survive."""


@dataclass(frozen=True, slots=True)
class Line:
    """One chart line."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]


def render(
    lines: Sequence[Line], title: str, xlabel: str, width: int = 78, height: int = 18
) -> str:
    """Draw `lines` as uncoloured text; an empty string when there is nothing to draw.

    A value plotext cannot scale (a log's `loss=1e308` or `1e-310`) is drawn at the chart's
    edge (+-1e15) or as 0, instead of failing the whole summary.
    """
    drawn = [(line, fit(line.xs, line.ys)) for line in lines]
    drawn = [(line, points) for line, points in drawn if points[0]]
    if not drawn:
        return ""
    figure = PlotextFigure()
    figure.theme("clear")
    figure.plotsize(width, height)
    for number, (line, (xs, ys)) in enumerate(drawn):
        figure.plot(xs, ys, label=line.label, marker=MARKERS[number % len(MARKERS)])
    figure.title(title)
    figure.xlabel(xlabel)
    if xlabel == "step":  # whole steps on the axis, never 236.8
        xs_all = [x for _, (xs, _) in drawn for x in xs]
        ticks = nice_ticks(min(xs_all), max(xs_all), max(2, width // 12), integer=True)
        figure.xticks(ticks, tick_labels(ticks))
    text = plotext.uncolorize(figure.build())
    return "\n".join(row.rstrip() for row in text.splitlines())


def bucket_max(
    xs: np.ndarray, ys: np.ndarray, points: int = MAX_POINTS
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Reduce a series sorted by x to about `points` points, keeping each x bucket's maximum."""
    keep = ~np.isnan(ys)
    xs, ys = xs[keep], ys[keep]
    if len(xs) <= points:
        return tuple(xs.tolist()), tuple(ys.tolist())
    edges = np.linspace(xs[0], xs[-1], points + 1)
    starts = np.unique(np.searchsorted(xs, edges[:-1], side="left"))
    starts = starts[starts < len(xs)]
    return tuple(xs[starts].tolist()), tuple(np.maximum.reduceat(ys, starts).tolist())


def vram_chart(frames: SessionFrames, width: int = 78, height: int = 18) -> str:
    """VRAM (the per-row peak where recorded) of each GPU over minutes since the start."""
    gpu = frames.gpu
    if gpu.empty:
        return ""
    start = frames.meta.get(META.started_at)
    t0 = float(start) if isinstance(start, (int, float)) else float(gpu["t"].min())
    best = np.fmax(gpu["mem_peak_bytes"].to_numpy(), gpu["mem_used_bytes"].to_numpy()) / GIB
    minutes = (gpu["t"].to_numpy() - t0) / 60.0
    lines = []
    index = gpu["gpu"].to_numpy()
    for number in np.unique(index[~np.isnan(index)])[: len(MARKERS)]:
        mask = index == number
        xs, ys = bucket_max(minutes[mask], best[mask])
        lines.append(Line(f"GPU {int(number)}", xs, ys))
    return render(lines, "VRAM (GiB)", "minutes since start", width, height)


def loss_chart(frames: SessionFrames, width: int = 78, height: int = 18) -> str:
    """Loss-like metrics of every task over steps.

    Rows that give a step are drawn against it (a `val/loss` logged without one is left out
    then). Only when no row gives a step: over epochs, the points of one epoch spread across
    it; without epochs either, over the logged point's number.
    """
    metrics = frames.metrics
    if metrics is None or metrics.empty:
        return ""
    wanted = metrics[metrics["metric"].astype(str).isin(LOSS_CHART)]
    wanted = wanted[np.isfinite(wanted["value"])]
    if wanted.empty:
        return ""
    if wanted["step"].notna().any():
        wanted, axis = wanted[wanted["step"].notna()], "step"
    elif wanted["epoch"].notna().any():
        wanted, axis = wanted[wanted["epoch"].notna()], "epoch"
    else:
        axis = "logged point"
    lines = []
    for (task, metric), rows in wanted.groupby(["task", "metric"], observed=True, sort=False):
        if axis == "step":
            x = rows["step"].to_numpy(dtype=float)
        elif axis == "epoch":
            x = np.array(spread_repeats(rows["epoch"].tolist()), dtype=float)
        else:
            x = np.arange(1, len(rows) + 1, dtype=float)
        xs, ys = _thin(x, rows["value"].to_numpy(dtype=float))
        lines.append(Line(f"{task}: {metric}", xs, ys))
    return render(lines[: len(MARKERS)], "loss", axis, width, height)


def _thin(
    xs: np.ndarray, ys: np.ndarray, points: int = MAX_POINTS
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    if len(xs) <= points:
        return tuple(xs.tolist()), tuple(ys.tolist())
    pick = np.linspace(0, len(xs) - 1, points).astype(int)
    return tuple(xs[pick].tolist()), tuple(ys[pick].tolist())

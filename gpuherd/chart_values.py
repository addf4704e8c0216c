"""Points that plotext can draw: finite, within +-1e15, and inside fixed axis limits.

plotext 5 fails on values it cannot scale: a line up to 1e308 or down to 1e-310 raises
OverflowError while it computes ticks, and a point far outside fixed limits makes it draw every
cell of the line on the way there (1e7 against 0..100 used gigabytes). Its tick labels also
grow with the magnitude: beyond about 1e30 they leave no room for the chart. A training log can
print `loss=1e308`, and a corrupt session can say a GPU is -5 % busy; a chart must still draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

LIMIT = 1e15
"""Larger magnitudes are drawn at +-LIMIT, the edge of a readable chart (labels of 16 digits)."""
TINY = 1e-15
"""Smaller non-zero magnitudes are drawn as 0."""


def _fit(value: float) -> float:
    if abs(value) < TINY:
        return 0.0
    return max(-LIMIT, min(LIMIT, value))


def drawable(xs: Sequence[float], ys: Sequence[float],
             x_range: tuple[float, float] | None = None,
             y_range: tuple[float, float] | None = None) -> tuple[list[float], list[float]]:
    """The points plotext can draw: non-finite points left out, the rest brought within range.

    Args:
        xs: x values.
        ys: y values, as many as `xs`.
        x_range: fixed x limits; points outside them are left out.
        y_range: fixed y limits; y values outside them are drawn at the limit.
    """
    out_x: list[float] = []
    out_y: list[float] = []
    for x, y in zip(xs, ys, strict=True):
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        if x_range is not None and not x_range[0] <= x <= x_range[1]:
            continue
        x, y = _fit(x), _fit(y)
        if y_range is not None:
            y = max(y_range[0], min(y_range[1], y))
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


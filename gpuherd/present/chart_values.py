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


def drawable(
    xs: Sequence[float],
    ys: Sequence[float],
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
) -> tuple[list[float], list[float]]:
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


NICE_STEPS = (1.0, 2.0, 2.5, 5.0)
"""Tick spacings a reader counts in, times a power of ten."""


def nice_steps(smallest: float, integer: bool = False) -> list[float]:
    """Round steps from the first at or above `smallest` upwards (a few decades of them)."""
    if not smallest > 0 or not math.isfinite(smallest):
        smallest = 1.0
    power = 10.0 ** math.floor(math.log10(smallest))
    steps = [f * power * 10.0**k for k in range(3) for f in NICE_STEPS]
    steps = [_clean(x) for x in steps if x >= smallest * (1 - 1e-9)]
    if integer:
        steps = [x for x in steps if x >= 1 and x == int(x) and (x >= 10 or x != 2.5)]
    return steps or [1.0]


def nice_ticks(low: float, high: float, max_ticks: int, integer: bool = False) -> list[float]:
    """Evenly spaced round ticks within [low, high], at most `max_ticks` of them.

    With `integer` they are whole numbers (steps of a training run: never `236.8`).
    """
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        return []
    if high == low:
        return [low]
    for step in nice_steps((high - low) / max(1, max_ticks), integer):
        first = math.ceil(low / step - 1e-9)
        last = math.floor(high / step + 1e-9)
        if last - first + 1 <= max_ticks:
            return [_clean(i * step) for i in range(first, last + 1)]
    return [low, high]


def even_ticks(
    low: float,
    high: float,
    rows: int,
    max_ticks: int = 6,
) -> tuple[list[float], float, float]:
    """Round y ticks the same number of text rows apart, and the y range that puts them there.

    plotext maps the y range onto rows 0 to rows - 1 and rounds: round ticks land on whole
    rows, equally apart, only when the range is chosen for them (at 80x24 a chart has about
    five rows, and 0.41, 0.53, 0.59, 0.71 read as uneven). The range starts at the lowest tick
    and ends where `rows - 1` rows of the tick spacing end. Returns (ticks, low, high).
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return [], low, high
    if high - low <= 1e-9 * max(abs(low), abs(high)):  # flat: centre it
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    span_rows = max(1, rows - 1)
    best: tuple[tuple[bool, bool, int, float], list[float], float, float] | None = None
    for intervals in range(1, min(max_ticks - 1, span_rows) + 1):
        per = span_rows // intervals  # rows between two ticks
        for step in nice_steps((high - low) * per / span_rows):
            start = _clean(math.floor(low / step + 1e-9) * step)
            top = start + step * span_rows / per
            if top >= high - 1e-12 * abs(high):
                break
        used = (high - low) / (top - start)  # how much of the height the data fills
        # Readable spacing first, then a range the data mostly fills, then up to four
        # intervals, then the fullest.
        score = (per >= 2 or span_rows < 4, used >= 0.6, min(intervals, 4), used)
        if best is None or score > best[0]:
            best = (score, [_clean(start + i * step) for i in range(intervals + 1)], start, top)
    assert best is not None
    return best[1], best[2], best[3]


def fixed_ticks(low: float, high: float, rows: int, max_ticks: int = 3) -> list[float]:
    """Round ticks of a fixed range (0 to 100 %) that land on whole rows, equally apart."""
    span_rows = max(1, rows - 1)
    for intervals in range(max(1, max_ticks - 1), 0, -1):
        step = (high - low) / intervals
        if span_rows % intervals == 0 and nice_steps(step)[0] == _clean(step):
            return [_clean(low + i * step) for i in range(intervals + 1)]
    return [low, high]


def log_ticks(low: float, high: float, max_ticks: int = 6) -> list[float]:
    """Ticks of a log10 axis, in log10 units: whole decades, with 2 and 5 when few fit."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        return []
    ticks = [float(k) for k in range(math.ceil(low - 1e-9), math.floor(high + 1e-9) + 1)]
    if len(ticks) < 3:
        ticks = sorted(
            t + math.log10(f)
            for t in range(math.floor(low) - 1, math.ceil(high) + 1)
            for f in (1, 2, 5)
            if low - 1e-9 <= t + math.log10(f) <= high + 1e-9
        )
    while len(ticks) > max_ticks:
        ticks = ticks[::2]
    return ticks


def log_labels(ticks: list[float]) -> list[str]:
    """The values of log10 ticks: `0.01 0.1 1 10`."""
    return [f"{10.0**t:.3g}" for t in ticks]


def tick_labels(ticks: list[float]) -> list[str]:
    """Labels with as many decimals as the spacing needs: `0.4 0.5`, `0.25 0.5`, `200 400`."""
    if not ticks:
        return []
    step = min((b - a for a, b in zip(ticks, ticks[1:], strict=False)), default=0.0)
    biggest = max(abs(t) for t in ticks)
    if biggest >= 1e6 or (0 < step < 1e-4):
        return [f"{t:.3g}" for t in ticks]
    decimals = 0
    while decimals < 6 and step and abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1
    return [f"{t:.{decimals}f}" for t in ticks]


def _clean(value: float) -> float:
    """`0.30000000000000004` -> `0.3`: ticks are compared and printed."""
    return float(f"{value:.12g}")


def spread_repeats(xs: Sequence[float]) -> list[float]:
    """Points logged at the same epoch, spread across it: the k-th of n at epoch e is e + k/n.

    A log without a step gives many points per epoch; drawn at the epoch itself they stack in
    one column. The epoch still in progress keeps the spacing of the one before it (when that
    had more points), so its points do not move as more arrive.
    """
    out: list[float] = []
    before = 0
    i = 0
    while i < len(xs):
        j = i
        while j < len(xs) and xs[j] == xs[i]:
            j += 1
        count = j - i
        per = max(count, before) if j == len(xs) else count
        out.extend(xs[i] + k / per for k in range(count))
        before, i = count, j
    return out

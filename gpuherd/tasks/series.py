"""Bounded metric histories: a decimating chart series, a recent window and a step-rate meter."""

from __future__ import annotations

from array import array
from collections import deque

from gpuherd.tasks.health import WINDOW_POINTS

DEFAULT_CHART_POINTS = 2000
"""Most points a chart series keeps, spread evenly over the whole run."""
DEFAULT_WINDOW_POINTS = WINDOW_POINTS
"""Most recent points kept at full resolution for the health rules."""


class MetricSeries:
    """The history of one metric of one task, bounded however long the run.

    `chart` keeps at most `max_points` points covering the whole run: when full, every other
    point goes and from then on only every `stride`-th new point is kept (the newest point is
    always available as `latest`). `window` keeps the last `window_points` points at full
    resolution for windowed health rules. Points are `(x, value)`, x being the step (or the epoch,
    or the point's index when the log gives neither, chosen by the first point).
    """

    __slots__ = (
        "_x",
        "_y",
        "_stride",
        "_seen",
        "window",
        "x_kind",
        "latest",
        "x_monotonic",
        "max_points",
    )

    def __init__(
        self, max_points: int = DEFAULT_CHART_POINTS, window_points: int = DEFAULT_WINDOW_POINTS
    ) -> None:
        self.max_points = max(4, max_points)
        self._x = array("d")
        self._y = array("d")
        self._stride = 1
        self._seen = 0
        self.window: deque[tuple[float, float]] = deque(maxlen=window_points)
        """The most recent points, oldest first."""
        self.x_kind: str | None = None
        """`step`, `epoch` or `index`, fixed by the first point."""
        self.latest: tuple[float, float] | None = None
        """The newest point (x may be an int step)."""
        self.x_monotonic = True
        """False once x went backwards (a per-epoch step counter); plot by index then."""

    def add(self, value: float, step: int | None, epoch: float | None) -> None:
        """Record one value at the position the log gives."""
        kind = self.x_kind
        if kind == "step" and step is not None:
            x: float = step
        elif kind is None:
            self.x_kind = "step" if step is not None else "epoch" if epoch is not None else "index"
            x = step if step is not None else epoch if epoch is not None else 0
        else:
            x = self._position(step, epoch)
        latest = self.latest
        if latest is not None and x < latest[0]:
            self.x_monotonic = False
        point = self.latest = (x, value)
        self.window.append(point)
        if self._seen % self._stride == 0:
            self._x.append(x)
            self._y.append(value)
            if len(self._x) >= self.max_points:
                self._x, self._y = self._x[::2], self._y[::2]
                self._stride *= 2
        self._seen += 1

    def points(self) -> tuple[tuple[float, float], ...]:
        """The chart points, oldest first, ending with the newest point."""
        pts = list(zip(self._x, self._y, strict=True))
        if self.latest is not None and (not pts or pts[-1] != self.latest):
            pts.append(self.latest)
        return tuple(pts)

    def __len__(self) -> int:
        return self._seen

    def _position(self, step: int | None, epoch: float | None) -> float:
        if self.x_kind == "epoch" and epoch is not None:
            return epoch
        if self.x_kind == "index":
            return float(self._seen)
        # The log stopped giving the coordinate this series uses: stay where it was.
        return self.latest[0] if self.latest is not None else 0.0


class StepRate:
    """Steps per second from `(time, step)` readings over a sliding time window.

    Readings that share a timestamp collapse into the newest one, so a backlog read in one go
    (every line stamped with the same receive time) cannot fake a huge rate.
    """

    def __init__(self, window_s: float = 120.0, min_span_s: float = 2.0) -> None:
        self.window_s = window_s
        self.min_span_s = min_span_s
        self._points: deque[tuple[float, float]] = deque(maxlen=512)

    def add(self, taken_at: float, step: float) -> None:
        """Record that the log was at `step` at `taken_at`."""
        points = self._points
        if points and step < points[-1][1]:
            points.clear()  # the counter restarted (new run or per-epoch counter)
        if points and abs(taken_at - points[-1][0]) < 1e-3:
            points[-1] = (taken_at, step)
        else:
            points.append((taken_at, step))
        while points and taken_at - points[0][0] > self.window_s and len(points) > 2:
            points.popleft()

    def rate(self) -> float | None:
        """Steps per second over the window; `None` until it spans `min_span_s`."""
        if len(self._points) < 2:
            return None
        (t0, s0), (t1, s1) = self._points[0], self._points[-1]
        if t1 - t0 < self.min_span_s:
            return None
        return (s1 - s0) / (t1 - t0)

    def clear(self) -> None:
        """Forget every reading."""
        self._points.clear()

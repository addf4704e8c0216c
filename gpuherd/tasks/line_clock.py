"""How often a live log gets new lines, and after how much silence its task reads `stalled`."""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

STALL_FACTOR = 5.0
"""A task whose writer lives is `stalled` after this many of its usual line intervals..."""
STALL_FLOOR_S = 30.0
"""...and never sooner than this (a log written every second is not stalled after 5 s)."""
STALL_GAPS = 20
"""Gaps between line arrivals remembered for the usual interval (their median)."""
STALL_MIN_GAPS = 2
"""Fewer gaps than this give no usual interval: the caller's fallback window applies."""


@dataclass
class LineClock:
    """The arrival times of a log's new lines, as far as the usual interval needs them.

    Only arrivals of lines read as they were written are fed in (not a backlog being caught up
    on), each timed by the file's modification time where known. The median resists the odd
    long gap (an evaluation pass, a checkpoint save) that a mean would follow.
    """

    gaps_s: deque[float] = field(default_factory=lambda: deque(maxlen=STALL_GAPS))
    last_at: float | None = None

    def arrived(self, at: float) -> None:
        """New lines arrived at `at` (an earlier or equal time adds no gap)."""
        if self.last_at is not None and at > self.last_at:
            self.gaps_s.append(at - self.last_at)
        if self.last_at is None or at > self.last_at:
            self.last_at = at

    def usual_interval_s(self) -> float | None:
        """The median of the remembered gaps; `None` under `STALL_MIN_GAPS` of them."""
        gaps = self.gaps_s
        return statistics.median(gaps) if len(gaps) >= STALL_MIN_GAPS else None

    def stall_after_s(self, fallback_s: float) -> float:
        """`max(STALL_FLOOR_S, STALL_FACTOR * usual)`, or `fallback_s` with no usual interval."""
        usual = self.usual_interval_s()
        return fallback_s if usual is None else max(STALL_FLOOR_S, STALL_FACTOR * usual)

"""The `LineParser` protocol every format implements, and the wrapper for stateless formats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from parsers.model import LogMetric

LineFunction = Callable[[str], "LogMetric | None"]


class LineParser(Protocol):
    r"""Turns one log line at a time into a metric.

    `feed` returns None for a line that is not a metric line of this format and raises
    `ValueError` for a line that matched but carries a value that is not a number. It accepts a
    raw line (ANSI colours, `\\r` redraws, any length) and normalises it itself.
    """

    def feed(self, line: str) -> LogMetric | None:
        """Parse the next line of the log."""
        ...

    def reset(self) -> None:
        """Forget any state, as after the log was truncated or rotated."""
        ...


class StatelessParser:
    """A `LineParser` around a pure `parse_<format>_line` function."""

    __slots__ = ("feed",)

    def __init__(self, parse_line: LineFunction) -> None:
        # the function itself, not a method calling it: one call less on every line
        self.feed: LineFunction = parse_line
        """Parse one line with the wrapped function."""

    def reset(self) -> None:
        """Nothing to forget."""

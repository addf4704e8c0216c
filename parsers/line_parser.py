"""The `LineParser` protocol every format implements, and the wrapper for stateless formats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from parsers.model import LogMetric
from parsers.values import check_metric, value_error

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


BAD_INPUT_ERRORS = (ArithmeticError, LookupError, RecursionError)
"""What a parser may still raise on input nobody foresaw (an overflow, an index past a split,
nesting too deep), besides ValueError; `CheckedParser` turns them into ValueError."""


class CheckedParser:
    """A `LineParser` whose `feed` raises nothing but ValueError and returns checked metrics.

    The one boundary between the format parsers and their callers (`make_parser` returns
    one): a failure on a line becomes a `ValueError`, which callers count as an unparsed line
    and go on with the next line, and every metric passes `parsers.values.check_metric`.
    """

    __slots__ = ("_fallback", "_feed", "parser")

    def __init__(self, parser: LineParser, fallback: LineFunction | None = None) -> None:
        """Wrap `parser`.

        Args:
            parser: the format's parser.
            fallback: a pure line function for the lines `parser` does not claim (it returns
                None for them): a console format's log also prints plain lines of its own
                (`step=45 loss=nan`, `val_acc=0.83`) that the generic parser reads.
        """
        self.parser = parser
        """The wrapped format parser."""
        self._feed = parser.feed
        self._fallback = fallback

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line with the wrapped parser, or the fallback when that claims none.

        Raises:
            ValueError: the line matched but does not parse, or its metric breaks the rules
                of `check_metric` (the original error is the `__cause__`).
        """
        try:
            metric = self._feed(line)
            if metric is None:
                if self._fallback is None:
                    return None
                metric = self._fallback(line)
                if metric is None:
                    return None
        except BAD_INPUT_ERRORS as error:
            raise value_error(f"{type(error).__name__}: {error}"[:200], error)  # noqa: B904
        return check_metric(metric)

    def reset(self) -> None:
        """Reset the wrapped parser."""
        self.parser.reset()

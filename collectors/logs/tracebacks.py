"""A traceback finding waits for the traceback's last line: a KeyboardInterrupt is no failure."""

from __future__ import annotations

from parsers.model import LogFinding

MAX_HELD_LINES = 2000
"""A traceback longer than this (or one whose last line never comes) is reported as it is."""


class TracebackHold:
    """Holds the `traceback` finding of a Python traceback until its exception line.

    The exception line is the first line after `Traceback (most recent call last):` that is not
    indented (frames and code are). A traceback that ends in `KeyboardInterrupt` is what Ctrl-C
    (or SIGINT sent to the command's process group) prints while the run is being stopped: it
    is dropped. Any other ends as the finding it was, under the line number of its first line.
    One per file generation; lines are fed in order.
    """

    __slots__ = ("held", "_lines")

    def __init__(self) -> None:
        self.held: tuple[int, LogFinding] | None = None
        """The traceback finding waiting for its exception line."""
        self._lines = 0

    def hold(self, line_no: int, finding: LogFinding) -> tuple[int, LogFinding] | None:
        """Hold a new traceback; returns one held before it (that one was real, and ended)."""
        earlier, self.held, self._lines = self.held, (line_no, finding), 0
        return earlier

    def line(self, text: str) -> tuple[int, LogFinding] | None:
        """Look at the next line while a traceback is held; the finding once it is real."""
        held = self.held
        if held is None:
            return None
        self._lines += 1
        if (not text or text[0] in " \t") and self._lines < MAX_HELD_LINES:
            return None  # a frame, its code, a caret line, a blank line: still inside
        self.held = None
        if text.startswith("KeyboardInterrupt") and self._lines < MAX_HELD_LINES:
            return None
        return held

    def flush(self) -> tuple[int, LogFinding] | None:
        """The held finding as it is (the file ended); nothing is held afterwards."""
        held, self.held = self.held, None
        return held

"""A terminal driver whose input thread sleeps until a key comes, instead of 10 times a second.

Textual's Linux driver reads keys on a thread that wakes every 0.1 s, whether or not a key
came, to see if it should stop and to let the escape-sequence parser time out a lone Escape.
On a dashboard left open for hours in a tmux pane that is a fifth of its CPU. This driver's
input thread waits on the terminal and on a pipe that is written when the driver stops it, with
no timeout unless the parser waits for the rest of an escape sequence (then until that
deadline). What it does with the bytes it reads is Textual's: the same parser and messages.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from codecs import getincrementaldecoder
from typing import Any

from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

POLL_S = 0.1
"""Textual's own wait, used when the parser does not say when it next needs a tick."""


class _WakingEvent(threading.Event):
    """An Event whose `set` also writes a byte to a pipe, to wake a thread waiting in select."""

    def __init__(self) -> None:
        super().__init__()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._lock = threading.Lock()

    @property
    def wake_fd(self) -> int:
        """The pipe's end a waiting thread selects on."""
        return self._wake_read

    def set(self) -> None:
        super().set()
        with self._lock:
            if self._wake_write >= 0:
                with contextlib.suppress(BlockingIOError):  # a full pipe wakes the reader too
                    os.write(self._wake_write, b"x")

    def drain(self) -> None:
        """Read what `set` wrote, so the next wait sleeps again."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 64)

    def close(self) -> None:
        """Close the pipe; a later `set` only sets the event (its fd may be another file's)."""
        with self._lock:
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
            self._wake_read = self._wake_write = -1


def next_tick_s(parser: object, now: float) -> float | None:
    """How long the input thread may wait with no input: `None` is until a key comes.

    The parser's deadline is `_timeout_time` (set while it waits for the rest of an escape
    sequence); a Textual without it gets Textual's own 0.1 s.
    """
    if not hasattr(parser, "_timeout_time"):
        return POLL_S
    deadline = parser._timeout_time
    return None if deadline is None else max(0.0, deadline - now)


class QuietInputDriver(LinuxDriver):
    """`LinuxDriver` with an input thread that wakes only for input, a parser deadline or exit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event: _WakingEvent = _WakingEvent()

    def run_input_thread(self) -> None:
        """Read keys and mouse events until the driver is stopped."""
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self.exit_event.wake_fd, selectors.EVENT_READ)
        try:
            while not self.exit_event.is_set():
                ready = selector.select(next_tick_s(parser, time.monotonic()))
                self._handle(ready, selector, parser, decode, final=False)
            # what came in as it stopped, as Textual reads it
            self._handle(selector.select(POLL_S), selector, parser, decode, final=True)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _event in parser.feed(""):
                    pass

    def _handle(
        self,
        ready: list[tuple[selectors.SelectorKey, int]],
        selector: selectors.BaseSelector,
        parser: XTermParser,
        decode: Any,
        final: bool,
    ) -> None:
        for key, _mask in ready:
            if key.fd != self.fileno:
                self.exit_event.drain()
                continue
            data = os.read(self.fileno, 4096)
            if not data:  # input closed (a pipe at its end): stop waiting on it, never spin
                selector.unregister(self.fileno)
                continue
            for event in parser.feed(decode(data, final=final)):
                self.process_message(event)
        for event in parser.tick():
            self.process_message(event)

    def close(self) -> None:
        """Close the wake pipe with the driver."""
        super().close()
        self.exit_event.close()


def quieter(driver_class: type[Any]) -> type[Any]:
    """The driver to run with: this one in place of Textual's Linux driver, else as chosen."""
    return QuietInputDriver if driver_class is LinuxDriver else driver_class

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
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

POLL_S = 0.1
"""Textual's own wait, used when the parser does not say when it next needs a tick."""


class _WakingEvent(threading.Event):
    """An Event that is also a pipe: readable exactly while the event is set.

    A thread waiting in `select` on `wake_fd` wakes when the event is set, however many threads
    wait (none of them reads the pipe; `clear` empties it). The pipe lives as long as the event:
    Textual stops and starts the input thread again on suspend and resume, with the same event.
    """

    def __init__(self) -> None:
        super().__init__()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._lock = threading.Lock()
        self._written = False

    @property
    def wake_fd(self) -> int:
        """The pipe's end a waiting thread selects on."""
        return self._wake_read

    def set(self) -> None:
        with self._lock:
            super().set()
            if not self._written:
                os.write(self._wake_write, b"x")
                self._written = True

    def clear(self) -> None:
        with self._lock:
            super().clear()
            if self._written:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 1)
                self._written = False

    def __del__(self) -> None:
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except (OSError, TypeError, AttributeError):  # closed, or the interpreter's exit
                pass


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

    SELECTOR: type[selectors.BaseSelector] = getattr(
        selectors, "PollSelector", selectors.SelectSelector
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event: _WakingEvent = _WakingEvent()

    def run_input_thread(self) -> None:
        """Read keys and mouse events until the driver is stopped."""
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        # poll, not select: the wake pipe is opened late and may get a descriptor above 1023
        selector = self.SELECTOR()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self.exit_event.wake_fd, selectors.EVENT_READ)
        try:
            while not self.exit_event.is_set():
                ready = selector.select(next_tick_s(parser, time.monotonic()))
                self._handle(ready, selector, parser, decode)
            # As Textual does: what is typed while it stops is left to the terminal's flush; a
            # lone Escape still waiting is handed over.
            for event in parser.tick():
                self.process_message(event)
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
    ) -> None:
        for key, _mask in ready:
            if key.fd != self.fileno:
                continue  # the wake pipe: the loop looks at the event
            data = os.read(self.fileno, 4096)
            if not data:  # input closed (a pipe at its end): stop waiting on it, never spin
                selector.unregister(self.fileno)
                continue
            text = decode(data)
            if text:  # empty while a character's bytes are split between two reads
                for event in parser.feed(text):
                    self.process_message(event)
        for event in parser.tick():
            self.process_message(event)


def quieter(driver_class: type[Any]) -> type[Any]:
    """The driver to run with: this one in place of Textual's Linux driver, else as chosen."""
    return QuietInputDriver if driver_class is LinuxDriver else driver_class


class QuietInputApp(App[int]):
    """An app that runs with `QuietInputDriver` where Textual would pick its Linux driver."""

    def get_driver_class(self) -> type[Any]:
        """Textual's driver, with an input thread that sleeps until a key comes."""
        return quieter(super().get_driver_class())

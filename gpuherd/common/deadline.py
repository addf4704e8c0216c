"""A deadline on the whole of a socket's exchange, not on each of its reads."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


class Deadline:
    """Cuts a socket when its exchange has taken its time.

    A socket's own timeout is per read, and each byte a peer drips starts it again: a peer
    that sends a byte now and then holds the exchange for ever. When the deadline passes, the
    socket is shut down, so a read blocked on it returns at once (it reads as the end of the
    stream, which `left` tells apart from a real end).

    Args:
        seconds: the whole exchange's time, from now.
        sock_of: the socket to cut when the time is up; asked then, not now, because the
            socket may not exist yet (a connection not yet made) or may have been replaced
            (one wrapped in TLS). `None` is nothing to cut.
    """

    def __init__(self, seconds: float, sock_of: Callable[[], socket.socket | None]) -> None:
        self.sock_of = sock_of
        self.ends_at = time.monotonic() + seconds
        self.passed = threading.Event()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        self.passed.set()
        sock = self.sock_of()
        if sock is not None:
            try:
                # The plain socket's shutdown, even of a TLS socket: `SSLSocket.shutdown` would
                # also drop its TLS state under the thread reading it, which then fails with
                # an error of its own instead of reading the end of the stream.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def left(self) -> float:
        """Seconds left; raises `TimeoutError` when none are."""
        left = self.ends_at - time.monotonic()
        if left <= 0 or self.passed.is_set():
            raise TimeoutError
        return left

    def cancel(self) -> None:
        """The exchange is over (or given up): the timer goes."""
        self._timer.cancel()

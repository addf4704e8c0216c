"""Draws the plain first frame on the terminal while Textual loads, then hands the terminal over.

Importing Textual and mounting the dashboard take most of a second on a busy host; the
collectors run meanwhile (`tui.collector_threads`). This module watches their first events
and, once the first GPU tick and the details of its processes are in, draws
`tui.first_paint.render`'s lines on the alternate screen, the one Textual draws on too, so
nothing is left on the normal screen after quitting. No Textual and no Rich here.

Input is kept quiet meanwhile (no echo, no line editing): keys typed before the dashboard is up
stay queued for it, instead of showing raw on the frame or waiting for Enter. The input mode is
restored before Textual starts, because Textual restores the mode it found when it exits.
"""

from __future__ import annotations

import os
import sys
import termios
import threading

from collectors.base import CollectorEvent, Sampled
from collectors.machine.host import gpu_pids
from collectors.samples import GpuTick, HostSample
from tui.first_paint import render

HOST_WAIT_S = 0.15
"""After the first GPU tick, how long the frame waits for the users and commands of its
processes (the host collector details new GPU pids within milliseconds of hearing of them)."""
ENTER = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"
"""Alternate screen, cursor hidden, screen cleared."""
LEAVE = "\x1b[?1049l\x1b[?25h"
"""Back to the normal screen, cursor shown (only when Textual never took over)."""
SYNC_START, SYNC_END = "\x1b[?2026h", "\x1b[?2026l"
"""Synchronized output: the terminal shows the frame whole (ignored where unsupported)."""


def frame_bytes(lines: list[str]) -> bytes:
    """The escape codes and text that draw `lines` from the top of a cleared alternate screen."""
    body = "".join(f"\x1b[{row};1H{line}" for row, line in enumerate(lines, start=1))
    return (SYNC_START + ENTER + body + SYNC_END).encode("utf-8", "replace")


class FirstPaint:
    """Collector events in (`tap`), one plain frame out, until `hand_over` or `close`.

    Args:
        hostname: Shown on the header line.
        in_fd: The terminal's input (its echo and line editing are off until `hand_over`).
        out_fd: Where the frame is written (Textual's output, stderr).
        host_wait_s: How long after the first GPU tick to wait for its processes' details.
    """

    def __init__(
        self, hostname: str, in_fd: int, out_fd: int, host_wait_s: float = HOST_WAIT_S
    ) -> None:
        self._hostname = hostname
        self._in_fd, self._out_fd = in_fd, out_fd
        self._host_wait_s = host_wait_s
        self._lock = threading.Lock()
        self._tick: GpuTick | None = None
        self._host: HostSample | None = None
        self._timer: threading.Timer | None = None
        self._done = False
        """Painted, or handed over: events are ignored from then on."""
        self._painted = False
        self._handed_over = False
        self._mode = termios.tcgetattr(in_fd)
        quiet = termios.tcgetattr(in_fd)
        quiet[3] &= ~(termios.ECHO | termios.ICANON)  # lflag; ISIG stays, so Ctrl-C works
        termios.tcsetattr(in_fd, termios.TCSANOW, quiet)

    @classmethod
    def start(cls, hostname: str) -> FirstPaint | None:
        """A first paint on this process's terminal, or `None` where none belongs.

        None unless stdin, stdout and stderr are all a terminal and this process is in the
        terminal's foreground (a background job changing the input mode would be stopped).
        """
        streams = (sys.stdin, sys.stdout, sys.stderr)
        try:
            if not all(s is not None and s.isatty() for s in streams):
                return None
            in_fd, out_fd = sys.stdin.fileno(), sys.stderr.fileno()
            if os.tcgetpgrp(in_fd) != os.getpgrp():
                return None
            return cls(hostname, in_fd, out_fd)
        except (OSError, ValueError, termios.error):
            return None

    def tap(self, event: CollectorEvent) -> None:
        """Take one collector event (on the collector's thread); paints once all is in."""
        if self._done or not isinstance(event, Sampled):
            return
        sample = event.sample
        with self._lock:
            if isinstance(sample, GpuTick) and self._tick is None:
                self._tick = sample
                self._timer = threading.Timer(self._host_wait_s, self.paint)
                self._timer.daemon = True
                self._timer.start()
            elif isinstance(sample, HostSample):
                self._host = sample
            ready = self._tick is not None and _details_cover(self._tick, self._host)
        if ready:
            self.paint()

    def paint(self) -> None:
        """Draw the frame from what came so far, unless done already or there is no GPU tick."""
        with self._lock:
            if self._done or self._tick is None:
                return
            self._done = True
            try:
                width, height = os.get_terminal_size(self._out_fd)
                lines = render(self._tick, self._host, self._hostname, width, height)
                if lines:
                    _write_all(self._out_fd, frame_bytes(lines))
                    self._painted = True
            except Exception:  # noqa: BLE001
                # On a collector's thread: a frame that cannot be drawn (the terminal went
                # away, a bug) must not stop the collector; the dashboard comes anyway.
                return

    @property
    def painted(self) -> bool:
        """Whether the frame is on the screen."""
        return self._painted

    def hand_over(self) -> None:
        """Stop painting and restore the input mode: Textual takes the terminal from here."""
        with self._lock:
            self._done = self._handed_over = True
            if self._timer is not None:
                self._timer.cancel()
            try:
                termios.tcsetattr(self._in_fd, termios.TCSANOW, self._mode)
            except termios.error:
                pass  # the terminal is gone; nothing to restore

    def close(self) -> None:
        """Restore the terminal if Textual never took it over: input mode and normal screen."""
        if self._handed_over:
            return
        self.hand_over()
        if self._painted:
            try:
                _write_all(self._out_fd, LEAVE.encode())
            except OSError:
                pass


def _details_cover(tick: GpuTick, host: HostSample | None) -> bool:
    """Whether `host` has details of every process on the GPUs of `tick`."""
    wanted = gpu_pids(tick)
    if not wanted:
        return True
    return host is not None and wanted <= {info.pid for info in host.processes}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

"""A tmux pane driven from the end-to-end tests: keys in, `capture-pane` text out."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def joined(screen: str) -> str:
    """The screen's text with lines joined, for a screen taken with `Pane.text("-J")` (each
    wrapped line already one line, trailing spaces kept): a long message wraps at the pane's
    width, at any character (a longer temporary path moves the break), so a phrase is searched
    across it. Without `-J` a space at the end of a row is dropped, and "kill -INT" wrapped
    after its space would read "kill-INT"."""
    return "".join(screen.splitlines())


class Pane:
    """One tmux pane on a private tmux server (its own socket), so no user session is touched."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        # -u: UTF-8 even when the test runs under the C locale (CI), or "°" and bars turn to "_".
        out = subprocess.run(
            ["tmux", "-u", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=10,
        )
        return out.stdout

    def start(self, command: str, width: int, height: int, output: Path | None = None) -> None:
        """Run `command` in a new pane; with `output`, every byte it writes is copied there."""
        copy = (";", "pipe-pane", "-t", "e2e", f"cat > {shlex.quote(str(output))}")
        # One tmux command line: the copy is attached before the pane's output is first read.
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            str(width),
            "-y",
            str(height),
            command,
            *(copy if output is not None else ()),
        )

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "e2e", key)
            time.sleep(0.15)

    def text(self, *args: str) -> str:
        return self.tmux("capture-pane", "-p", "-t", "e2e", *args)

    def wait_for(
        self, check: Callable[[str], bool], timeout_s: float = 15.0, unwrap: bool = False
    ) -> str:
        """The screen once `check` accepts it; `unwrap`: each wrapped line is given as one
        line, its spaces kept (`capture-pane -J`), for a message whose wrap depends on a path."""
        args = ("-J",) if unwrap else ()
        deadline = time.monotonic() + timeout_s
        screen = self.text(*args)
        while not check(screen):
            if time.monotonic() > deadline:
                raise AssertionError(f"screen never matched; last screen:\n{screen}")
            time.sleep(0.1)
            screen = self.text(*args)
        return screen

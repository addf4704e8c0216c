"""The recorded command: started in its own process group, its output teed to `command.log`."""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from collectors.base import GpuherdError

CHUNK_BYTES = 64 * 1024
PARTIAL_LINE_S = 0.2
KILL_AFTER_SIGNALS = 3
"""The third SIGINT/SIGTERM the recorder receives sends SIGKILL to the command's group."""
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


class CommandStartError(GpuherdError):
    """The command could not be started; `exit_code` follows the shell (127, 126)."""

    def __init__(self, msg: str, exit_code: int) -> None:
        super().__init__(msg, title="command")
        self.exit_code = exit_code


def exit_status(returncode: int) -> int:
    """A `Popen.returncode` as a shell exit status: killed by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class _Tee:
    """Copies one pipe to the shared log file and to one of our own streams.

    Our own stream gets every chunk as it comes. The log gets whole lines only (ended by a
    newline, or by a carriage return for progress bars that redraw in place): stdout and stderr
    share the log, and an unbuffered `print` writes its text and its newline in two calls, so
    writing chunks as they come would splice one stream's line into the other's. A partial
    line is written anyway after `PARTIAL_LINE_S` without more output (a prompt, a bar).
    """

    def __init__(self, pipe: BinaryIO, log: _LogSink, echo: BinaryIO | None, name: str) -> None:
        self._pipe = pipe
        self._log = log
        self._echo = echo
        self._pending = b""
        self.thread = threading.Thread(target=self._run, name=f"tee-{name}", daemon=True)

    def _run(self) -> None:
        fd = self._pipe.fileno()
        while True:
            if self._pending:
                ready, _, _ = select.select([fd], [], [], PARTIAL_LINE_S)
                if not ready:
                    self._log.write(self._pending)
                    self._pending = b""
                    continue
            try:
                chunk = os.read(fd, CHUNK_BYTES)
            except OSError:
                break
            if not chunk:
                break
            self._write_echo(chunk)
            data = self._pending + chunk
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut:
                self._log.write(data[:cut])
            self._pending = data[cut:]
        if self._pending:
            self._log.write(self._pending)
        self._pipe.close()

    def _write_echo(self, chunk: bytes) -> None:
        if self._echo is None:
            return
        try:
            self._echo.write(chunk)
            self._echo.flush()
        except (OSError, ValueError):
            # Our own terminal went away (closed pipe, hung-up tmux pane): keep draining the
            # command's output into the log so it never blocks on a full pipe.
            self._echo = None

class _LogSink:
    """`command.log`, written unbuffered so the tail collector sees output as it comes."""

    def __init__(self, path: Path, on_error: Callable[[OSError], None]) -> None:
        self._lock = threading.Lock()
        self._on_error = on_error
        self._file: BinaryIO | None = open(path, "ab", buffering=0)  # noqa: SIM115

    def write(self, chunk: bytes) -> None:
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.write(chunk)
            except OSError as error:
                # Disk full or similar: stop logging but keep the command's output flowing.
                self._file.close()
                self._file = None
                self._on_error(error)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class ChildCommand:
    """Runs one command the way `gpuherd --record DIR -- CMD` needs it.

    The command gets its own session (and so its own process group): the terminal's Ctrl-C
    reaches only gpuherd, which forwards it once to the whole group (torchrun workers, data
    loader processes) and keeps recording while the command shuts down. Its stdout and stderr go
    to `log_path` and to our own stdout and stderr.
    """

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        echo: bool = True,
        on_log_error: Callable[[OSError], None] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("empty command")
        self.argv = list(argv)
        self.log_path = log_path
        self._echo = echo
        self._on_log_error = on_log_error or (lambda error: None)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: _LogSink | None = None
        self._tees: list[_Tee] = []
        self.signals_forwarded = 0

    @property
    def pid(self) -> int:
        """The command's pid (also its process group id)."""
        if self._proc is None:
            raise RuntimeError("command not started")
        return self._proc.pid

    def start(self) -> None:
        """Start the command; raises `CommandStartError` when it cannot run at all."""
        env = dict(os.environ)
        # Python buffers a piped stdout in 8 KiB blocks; metrics would arrive minutes late.
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._log = _LogSink(self.log_path, self._on_log_error)
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, env=env,
            )
        except FileNotFoundError as error:
            self._log.close()
            raise CommandStartError(f"command not found: {self.argv[0]}",
                                    EXIT_NOT_FOUND) from error
        except PermissionError as error:
            self._log.close()
            raise CommandStartError(f"command not executable: {self.argv[0]} ({error.strerror})",
                                    EXIT_NOT_EXECUTABLE) from error
        except OSError as error:
            self._log.close()
            code = EXIT_NOT_FOUND if error.errno == errno.ENOENT else EXIT_NOT_EXECUTABLE
            raise CommandStartError(f"cannot run {self.argv[0]}: {error.strerror}",
                                    code) from error
        assert self._proc.stdout is not None and self._proc.stderr is not None
        out = sys.stdout.buffer if self._echo else None
        err = sys.stderr.buffer if self._echo else None
        self._tees = [_Tee(self._proc.stdout, self._log, out, "stdout"),
                      _Tee(self._proc.stderr, self._log, err, "stderr")]
        for tee in self._tees:
            tee.thread.start()

    def poll(self) -> int | None:
        """The exit status if the command has ended, else `None`."""
        code = self._require().poll()
        return None if code is None else exit_status(code)

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the command to end; its exit status, or `None` on timeout."""
        try:
            return exit_status(self._require().wait(timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def forward(self, signum: int) -> int:
        """Send `signum` to the command's group; from the third signal on, SIGKILL.

        Returns the signal actually sent (0 when the command had already ended).
        """
        proc = self._require()
        if proc.poll() is not None:
            return 0
        self.signals_forwarded += 1
        sent = signal.SIGKILL if self.signals_forwarded >= KILL_AFTER_SIGNALS else signum
        try:
            os.killpg(proc.pid, sent)
        except ProcessLookupError:
            return 0
        return int(sent)

    def finish(self, drain_timeout_s: float = 2.0) -> None:
        """After the command ended: let the tee threads drain the pipes, then close the log.

        A grandchild that outlives the command may hold the pipes open; it is not waited for
        beyond `drain_timeout_s`.
        """
        for tee in self._tees:
            tee.thread.join(drain_timeout_s)
        if self._log is not None:
            self._log.close()

    def _require(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("command not started")
        return self._proc

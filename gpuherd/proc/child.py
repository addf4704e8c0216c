"""The recorded command, run under a supervisor process so that it never depends on gpuherd."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from collectors.base import GpuherdError
from gpuherd.proc import status
from gpuherd.proc.status import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, exit_status

__all__ = [
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "ChildCommand",
    "CommandStartError",
    "exit_status",
]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys\n"
    # after the standard library, before site-packages: only gpuherd's own packages can
    # come from there, never a module of the standard library
    "at = next((i for i, p in enumerate(sys.path)\n"
    "           if p.endswith(('site-packages', 'dist-packages'))), len(sys.path))\n"
    f"sys.path.insert(at, {_PACKAGE_ROOT!r})\n"
    "from gpuherd.proc.supervisor import main\n"
    "sys.exit(main())\n"
)
SUPERVISOR = [sys.executable, "-I", "-c", _BOOT]
"""`python -m gpuherd.proc.supervisor`, pinned to this very gpuherd and isolated (-I), so that
neither the working directory (a checkout of another gpuherd version, a `json.py` of the
user's) nor PYTHONPATH decides what the supervisor imports."""
KILL_AFTER_SIGNALS = 3
"""The third SIGINT/SIGTERM the recorder receives sends SIGKILL to the command's group."""


class CommandStartError(GpuherdError):
    """The command could not be started; `exit_code` follows the shell (127, 126)."""

    def __init__(self, msg: str, exit_code: int) -> None:
        super().__init__(msg, title="command")
        self.exit_code = exit_code


class ChildCommand:
    """Runs one command the way `gpuherd --record DIR -- CMD` needs it.

    A supervisor process (`gpuherd.proc.supervisor`) in a session of its own starts the command
    in its own process group, copies its stdout and stderr to `log_path` (a whole line at a
    time) and to our own stdout and stderr, and writes `exit_path` when it ends. Nothing of the
    command depends on this process: kill -9 of gpuherd leaves it running, its output logged.
    The terminal's Ctrl-C reaches only gpuherd, which forwards it once to the whole group
    (torchrun workers, data loader processes) and keeps recording while the command shuts down.
    """

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        echo: bool = True,
        on_log_error: Callable[[OSError], None] | None = None,
        exit_path: Path | None = None,
    ) -> None:
        if not argv:
            raise ValueError("empty command")
        self.argv = list(argv)
        self.log_path = log_path
        self.exit_path = exit_path or log_path.with_suffix(".exit.json")
        """Where the supervisor records the exit (`command.log` -> `command.exit.json`)."""
        self._echo = echo
        self._on_log_error = on_log_error or (lambda error: None)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._ended = threading.Event()
        self._exit: dict[str, Any] = {}
        self._reader: threading.Thread | None = None
        self.signals_forwarded = 0
        self.warnings: list[str] = []
        """Things to tell the person once the command ended (nothing of its output is lost
        because of them, unless they say so)."""

    @property
    def pid(self) -> int:
        """The command's pid (also its process group id)."""
        if self._pid is None:
            raise RuntimeError("command not started")
        return self._pid

    @property
    def log_dropped_bytes(self) -> int:
        """Bytes of output that could not be written to the log (disk full); known at the end."""
        return int(self._exit.get("log_dropped_bytes") or 0)

    def start(self) -> None:
        """Start the command; raises `CommandStartError` when it cannot run at all."""
        env = dict(os.environ)
        # Python buffers a piped stdout in 8 KiB blocks; metrics would arrive minutes late.
        env.setdefault("PYTHONUNBUFFERED", "1")
        read_fd, write_fd = os.pipe()
        argv = [
            *SUPERVISOR,
            "--log",
            str(self.log_path),
            "--exit-file",
            str(self.exit_path),
            "--status-fd",
            str(write_fd),
            *([] if self._echo else ["--no-echo"]),
            "--",
            *self.argv,
        ]
        sink = None if self._echo else subprocess.DEVNULL
        sys.stdout.flush()  # what we printed comes before the command's output
        sys.stderr.flush()
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                start_new_session=True,
                pass_fds=(write_fd,),
                env=env,
            )
        except OSError as error:
            os.close(read_fd)
            raise CommandStartError(
                f"cannot start {sys.executable}: {error.strerror}", EXIT_NOT_EXECUTABLE
            ) from error
        finally:
            os.close(write_fd)
        messages = _messages(read_fd)
        first = next(messages, None)
        if first is None or first["event"] != status.STARTED:
            messages.close()
            code = exit_status(self._proc.wait())
            if first is None:
                raise CommandStartError(
                    f"cannot run {self.argv[0]}: the supervisor exited with status {code}",
                    EXIT_NOT_EXECUTABLE,
                )
            raise CommandStartError(
                str(first.get("error")), int(first.get("exit_code", EXIT_NOT_EXECUTABLE))
            )
        self._pid = int(first["pid"])
        self._reader = threading.Thread(
            target=self._follow, args=(messages,), name="command:status", daemon=True
        )
        self._reader.start()

    def _follow(self, messages: Iterator[dict[str, Any]]) -> None:
        """Read the supervisor's messages until it reports the exit (or dies)."""
        for message in messages:
            if message["event"] == status.LOG_FAILED:
                self._on_log_error(
                    OSError(int(message.get("errno") or 0), str(message.get("error")))
                )
            elif message["event"] == status.EXITED:
                self._exit = message
                if message.get("warning"):
                    self.warnings.append(str(message["warning"]))
                break
        if not self._exit:
            # The supervisor itself was killed: its status is all there is to say.
            proc = self._require()
            code = exit_status(proc.wait())
            self._exit = {"exit_code": code}
            self.warnings.append(
                f"the supervisor of the command ended with status {code}; "
                f"the command (pid {self._pid}) may still run, and its "
                "output is no longer logged"
            )
        self._ended.set()

    def poll(self) -> int | None:
        """The exit status if the command has ended, else `None`."""
        return self.wait(0)

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the command to end; its exit status, or `None` on timeout."""
        self._require()
        if not self._ended.wait(timeout_s):
            return None
        return int(self._exit["exit_code"])

    def forward(self, signum: int) -> int:
        """Send `signum` to the command's group; from the third signal on, SIGKILL.

        Returns the signal actually sent (0 when the command had already ended).
        """
        self._require()
        if self._ended.is_set():
            return 0
        self.signals_forwarded += 1
        sent = signal.SIGKILL if self.signals_forwarded >= KILL_AFTER_SIGNALS else signum
        try:
            os.killpg(self.pid, sent)
        except ProcessLookupError:
            return 0
        return int(sent)

    def finish(self, drain_timeout_s: float = 2.0) -> None:
        """After the command ended: give the supervisor time to copy the last output.

        A process the command left behind may hold its stdout open; the supervisor keeps
        copying that output (so it never gets SIGPIPE) and is not waited for beyond
        `drain_timeout_s`.
        """
        proc = self._require()
        try:
            proc.wait(drain_timeout_s)
        except subprocess.TimeoutExpired:
            pass
        if self._reader is not None:
            self._reader.join(drain_timeout_s)

    def _require(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._pid is None:
            raise RuntimeError("command not started")
        return self._proc


def _messages(fd: int) -> Generator[dict[str, Any], None, None]:
    """The supervisor's status messages, one at a time, until it closes the pipe."""
    with os.fdopen(fd, "rb") as pipe:
        for line in pipe:
            message = status.decode(line)
            if message is not None:
                yield message

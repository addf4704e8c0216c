"""What the supervisor tells gpuherd on its status pipe, and the exit record it leaves behind.

Standard library only: the supervisor imports this, and it must start in a few tens of ms.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from gpuherd.common.safe_files import Directory

EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126

STARTED = "started"
"""`pid`: the command runs (its process group id is its pid)."""
START_FAILED = "start_failed"
"""`exit_code` (127, 126), `error`: the command could not be started at all."""
LOG_FAILED = "log_failed"
"""`errno`, `error`: the log could not be written (disk full); the command goes on."""
EXITED = "exited"
"""`exit_code`, `ended_at`, `log_dropped_bytes`, optional `warning`: the command ended; the
log holds everything it wrote (unless a process it left behind still writes to it)."""


def exit_status(returncode: int) -> int:
    """A `Popen.returncode` as a shell exit status: killed by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def start_error(program: str, error: OSError) -> tuple[str, int]:
    """Why `program` could not be started, and the exit status a shell would give."""
    if isinstance(error, FileNotFoundError):
        return f"command not found: {program}", EXIT_NOT_FOUND
    if isinstance(error, PermissionError):
        return f"command not executable: {program} ({error.strerror})", EXIT_NOT_EXECUTABLE
    code = EXIT_NOT_FOUND if error.errno == errno.ENOENT else EXIT_NOT_EXECUTABLE
    return f"cannot run {program}: {error.strerror}", code


def encode(event: str, **fields: Any) -> bytes:
    """One status message: a JSON object on one line (well under PIPE_BUF, so written whole)."""
    return json.dumps({"event": event, **fields}).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any] | None:
    """A status message, or `None` for a line that is not one (a cut-short last line)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) and "event" in message else None


class ExitRecordFile:
    """Where the exit record goes: its directory opened once, as the command starts.

    The record is written when the command ends, hours later perhaps; by then the path may name
    something else (the session directory renamed away, a link in its place), and the record
    belongs in the directory the log went to. The open descriptor still names that one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._directory: Directory | None = None
        self._error: OSError | None = None
        try:
            self._directory = Directory(path.parent)
        except OSError as error:
            self._error = error  # reported when the record cannot be written

    def write(self, record: dict[str, Any]) -> None:
        """Write `record` durably and atomically (a temporary file, fsync, rename), then close.

        Raises `OSError` when it cannot be written (the caller reports it).
        """
        if self._directory is None:
            raise self._error or OSError(errno.EBADF, f"{self.path} was written already")
        text = json.dumps(record, indent=1, allow_nan=False) + "\n"
        # The directory may be one other users write to: never a fixed temporary name or a link.
        try:
            self._directory.write_atomic(self.path.name, text.encode("utf-8"))
        finally:
            self.close()

    def close(self) -> None:
        """Close the directory (idempotent)."""
        if self._directory is not None:
            self._directory.close()
            self._directory = None


class StatusPipe:
    """The write end of the status pipe; gpuherd may be gone, which is no error here."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        if fd is not None:
            # A gpuherd that stopped reading (SIGSTOP, a hang) must not stall the command.
            os.set_blocking(fd, False)

    def send(self, event: str, **fields: Any) -> None:
        """Send one message; drop it (and all later ones) when nobody reads any more."""
        if self._fd is None:
            return
        try:
            os.write(self._fd, encode(event, **fields))
        except BlockingIOError:
            pass  # a full pipe: gpuherd has not read three short messages; it is stuck
        except OSError:
            self.close()

    def close(self) -> None:
        """Close the pipe: gpuherd reads end-of-file and knows no more messages come."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

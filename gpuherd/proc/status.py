"""What the supervisor tells gpuherd on its status pipe, and the exit record it leaves behind.

Standard library only: the supervisor imports this, and it must start in a few tens of ms.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from gpuherd.safe_files import Directory

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


def write_exit_record(path: Path, record: dict[str, Any]) -> None:
    """Write `record` to `path` durably and atomically: a temporary file, fsync, rename.

    Raises `OSError` when it cannot be written (the caller reports it).
    """
    text = json.dumps(record, indent=1, allow_nan=False) + "\n"
    # The directory may be one other users write to: never a fixed temporary name or a link.
    with Directory(path.parent) as directory:
        directory.write_atomic(path.name, text.encode("utf-8"))


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

"""The recorded command's log: whole lines of two streams, fsynced, never in the command's way."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

from gpuherd.common.safe_files import Directory

PARTIAL_LINE_S = 0.2
"""A partial line (a prompt, a progress bar) is written after this long without more output."""
MAX_PENDING_BYTES = 1 << 20
"""A line longer than this is written in pieces, so a line without end costs bounded memory."""
SYNC_INTERVAL_S = 2.0
"""Written bytes reach the disk (fsync) at most this long after they were written, as the
other session files do."""
_SYNC_UNSUPPORTED = (errno.EINVAL, errno.ENOTSUP, errno.EROFS)
"""fsync errors of files that cannot be synced at all (a device such as /dev/null)."""


class LogFile:
    """An append-only log, written unbuffered so that a tail sees each line as it comes.

    A failed write (disk full, file size limit) ends writing for good: the first error goes to
    `on_error`, every byte not written from then on is counted in `dropped_bytes`, and the caller
    goes on, so the command whose output this is never blocks or dies because of its log.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        on_error: Callable[[OSError], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sync_interval_s: float = SYNC_INTERVAL_S,
    ) -> None:
        self.path = os.fspath(path)
        self.error: OSError | None = None
        """The failure that ended writing, if any."""
        self.dropped_bytes = 0
        """Bytes given to `write` that are not in the file."""
        self.sync_interval_s = sync_interval_s
        self._on_error = on_error or (lambda error: None)
        self._clock = clock
        self._dirty_since: float | None = None
        self._fd: int | None = None
        try:
            self._fd = _open_log(self.path)
        except OSError as error:
            self._fail(error)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append `data` (all of it, or count what could not be written)."""
        view = memoryview(data).cast("B")
        while view.nbytes and self._fd is not None:
            try:
                written = os.write(self._fd, view)
            except OSError as error:
                self._fail(error)
                break
            view = view[written:]
            if self._dirty_since is None:
                self._dirty_since = self._clock()
        self.dropped_bytes += view.nbytes
        self.sync_if_due()

    def sync_due_in(self) -> float | None:
        """Seconds until written bytes are due to be synced; `None` when all are on disk."""
        if self._dirty_since is None or self._fd is None:
            return None
        return max(0.0, self._dirty_since + self.sync_interval_s - self._clock())

    def sync_if_due(self) -> None:
        """Sync to disk when the oldest unsynced byte was written `sync_interval_s` ago."""
        if self.sync_due_in() == 0.0:
            self.sync()

    def sync(self) -> None:
        """Sync to disk now (fsync), if anything was written since the last time."""
        if self._fd is None or self._dirty_since is None:
            return
        self._dirty_since = None
        try:
            os.fsync(self._fd)
        except OSError as error:
            if error.errno not in _SYNC_UNSUPPORTED:
                self._fail(error)

    def close(self) -> None:
        """Sync and close; later writes are counted as dropped."""
        self.sync()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _fail(self, error: OSError) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass  # the write already failed; its error is the one worth reporting
            self._fd = None
        if self.error is None:
            self.error = error
            self._on_error(error)


def _open_log(path: str) -> int:
    """The log opened for appending, relative to its directory and never through a link.

    The recorder creates `command.log` new (`O_EXCL`) just before; a link put in its place
    since is refused (`ELOOP`), not followed. A device (`/dev/full` in the tests) is allowed.
    """
    with Directory(os.path.dirname(path) or ".") as directory:
        return directory.open(os.path.basename(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)


class LineJoiner:
    """One stream's way into a log it shares with another stream: whole lines only.

    stdout and stderr share the log, and an unbuffered `print` writes its text and its newline
    in two calls, so writing chunks as they come would splice one stream's line into the
    other's. A line ends at a newline or at a carriage return (a progress bar that redraws in
    place). The partial last line waits until its end comes, until `partial_line_s` pass
    without more output (a prompt, a bar), or until it grows past `max_pending_bytes`.
    """

    def __init__(
        self,
        log: LogFile,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        partial_line_s: float = PARTIAL_LINE_S,
    ) -> None:
        self._log = log
        self._max_pending_bytes = max_pending_bytes
        self._partial_line_s = partial_line_s
        self._pending = bytearray()
        self._last_data_at = 0.0

    @property
    def pending_bytes(self) -> int:
        """Bytes of the partial line not written yet."""
        return len(self._pending)

    def feed(self, chunk: bytes, now: float) -> None:
        """Take the next chunk of the stream, read at `now` (monotonic seconds)."""
        # Only the new chunk is searched for a line end and the partial line grows in place:
        # joining it again for every 64 KiB chunk made a 40 MiB line without newline take 17 s.
        data = memoryview(chunk)
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
        if cut and self._pending:
            self._pending += data[:cut]
            self._write_pending()
        elif cut:
            self._log.write(data[:cut])
        self._pending += data[cut:]
        if len(self._pending) >= self._max_pending_bytes:
            self._write_pending()
        self._last_data_at = now

    def due_in(self, now: float) -> float | None:
        """Seconds until the partial line is written for want of more output; `None`: none."""
        if not self._pending:
            return None
        return max(0.0, self._last_data_at + self._partial_line_s - now)

    def flush_if_quiet(self, now: float) -> None:
        """Write the partial line if the stream has been quiet for `partial_line_s`."""
        if self.due_in(now) == 0.0:
            self._write_pending()

    def flush(self) -> None:
        """Write the partial line now (the stream ended)."""
        if self._pending:
            self._write_pending()

    def _write_pending(self) -> None:
        self._log.write(self._pending)
        self._pending = bytearray()  # a new one: clear() would keep a 1 MiB buffer allocated

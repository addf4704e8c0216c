"""Follow a whole-file document (a `trainer_state.json`): re-read it whenever it changes."""

from __future__ import annotations

import os
from dataclasses import dataclass

from collectors.base import CollectorError
from collectors.logs.logtail_files import open_regular_file

DEFAULT_MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Signature:
    device: int
    inode: int
    size: int
    mtime_ns: int


class DocumentFollower:
    """Re-reads a small whole-file document (a `trainer_state.json`) whenever it changes."""

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.size: int | None = None
        self.modified_at: float | None = None
        self._signature: _Signature | None = None
        self._pending: _Signature | None = None

    def read_if_changed(self) -> str | None:
        """The document's text when it changed since the last successful read, else `None`.

        Raises:
            CollectorError: the path is a directory, unreadable or larger than `max_bytes`.
        """
        opened = open_regular_file(self.path)
        if opened is None:
            self.size = None
            return None
        fd, info = opened
        try:
            signature = _Signature(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            self.size, self.modified_at = info.st_size, info.st_mtime
            if signature == self._signature:
                return None
            if info.st_size > self.max_bytes:
                raise CollectorError(
                    f"{self.path}: {info.st_size} bytes is too large for a "
                    f"whole-file format (limit {self.max_bytes})",
                    title="log",
                )
            data = os.pread(fd, self.max_bytes + 1, 0)
        finally:
            os.close(fd)
        self._pending = signature
        return data.decode("utf-8", "replace")

    def accept(self) -> None:
        """The text last returned parsed; do not hand it out again until the file changes."""
        self._signature = self._pending

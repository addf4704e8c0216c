"""What a log tail needs to lose nothing to rotation: files opened as they appear, copies found."""

from __future__ import annotations

import itertools
import os
import stat
import threading
from collections import deque

FileId = tuple[int, int]
"""(device, inode) of an open file: unique among files held open."""

MAX_NEXT_FILES = 64
"""Files opened ahead of the tail at most (a tail 64 rotations behind loses the later ones
that were renamed away before it got to them)."""
MAX_COPY_CANDIDATES = 1000
"""Directory entries looked at when searching for a copytruncate copy."""


class NextFiles:
    """Files opened the moment they appeared at a followed path, oldest first; thread-safe.

    The watchdog observer adds to it (`add`) and the tail takes from it, so a file that is
    renamed away again before the tail's next look (rotation every 0.2 s) is still read, in
    order, through the descriptor opened when it was created.
    """

    def __init__(self, limit: int = MAX_NEXT_FILES) -> None:
        self.limit = limit
        self.overflowed = 0
        """Files not kept because `limit` were already waiting."""
        self._lock = threading.Lock()
        self._files: deque[tuple[int, os.stat_result]] = deque()
        self._closed = False

    def add(self, fd: int, info: os.stat_result, current: FileId | None) -> None:
        """Keep `fd`, unless it is the file being read (`current`) or one kept already."""
        ident = (info.st_dev, info.st_ino)
        with self._lock:
            keep = not self._closed and ident != current and len(self._files) < self.limit \
                and all((i.st_dev, i.st_ino) != ident for _, i in self._files)
            if keep:
                self._files.append((fd, info))
            elif len(self._files) >= self.limit:
                self.overflowed += 1
        if not keep:
            os.close(fd)

    def largest(self, current: FileId | None) -> int | None:
        """The largest size now of the kept files other than `current`; `None` when none.

        Any of them holding a line means the writer has moved on from `current`.
        """
        with self._lock:
            sizes = [os.fstat(fd).st_size for fd, info in self._files
                     if (info.st_dev, info.st_ino) != current]
        return max(sizes) if sizes else None

    def discard(self, ident: FileId | None) -> None:
        """Close and forget a kept file that is (or was opened as) the file being read."""
        with self._lock:
            same = [item for item in self._files if (item[1].st_dev, item[1].st_ino) == ident]
            for item in same:
                self._files.remove(item)
        for fd, _ in same:
            os.close(fd)

    def pop(self) -> tuple[int, os.stat_result] | None:
        """Take the oldest kept file; `None` when none."""
        with self._lock:
            return self._files.popleft() if self._files else None

    def close(self) -> None:
        """Close every kept file; later `add`s close theirs at once."""
        with self._lock:
            self._closed = True
            files, self._files = list(self._files), deque()
        for fd, _ in files:
            os.close(fd)


def find_copy(path: str, head: bytes, recent: bytes, offset: int) -> int | None:
    """Open the copy that copytruncate made of the file at `path` before cutting it.

    The copy lies beside the log under a longer name (`train.log.1`, `train.log-20250101`),
    starts with the same `head`, is at least `offset` bytes long and holds `recent` (the last
    bytes read) just before `offset`. The newest such file is taken.

    Returns:
        A read-only descriptor of the copy, or `None` when there is none (`> log`, a copy
        compressed or moved away already).
    """
    if not head:
        return None
    directory, base = os.path.split(os.path.abspath(path))
    candidates: list[tuple[int, str]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in itertools.islice(entries, MAX_COPY_CANDIDATES):
                if entry.name == base or not entry.name.startswith(base):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_size >= offset:
                    candidates.append((info.st_mtime_ns, entry.path))
    except OSError:
        return None
    for _, candidate in sorted(candidates, reverse=True):
        try:
            fd = os.open(candidate, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            same = (os.pread(fd, len(head), 0) == head
                    and os.pread(fd, len(recent), offset - len(recent)) == recent)
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)
    return None

"""The reservation ledger every gpuherd of every user on the host shares, under one flock.

A directory like /tmp (mode 1777) holds `ledger.lock` and one small JSON file per reservation,
written by its owner (temp name, then rename) and readable by all. Nothing read from it is ever
executed: an entry holds a GPU UUID, a byte count, who wrote it and until when it counts. The
rules, and what is refused, are in docs/queue.md, "The shared ledger".
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuherd.queue.headroom import Reservation
from gpuherd.queue.ledger_files import (
    MAX_ENTRY_BYTES,
    LedgerEntry,
    LedgerError,
    alive,
    check_mode,
    invalid,
    is_link,
    owner_of,
    parse_entry,
)

__all__ = ["Ledger", "LedgerEntry", "LedgerError", "LedgerView", "default_ledger_dir"]

DEFAULT_DIR = "/tmp/gpuherd-ledger"
LOCK_NAME = "ledger.lock"
ENTRY_PREFIX = "res-"
ENTRY_SUFFIX = ".json"
TEMP_PREFIX = ".tmp-"
LOCK_TIMEOUT_S = 30.0
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""O_NONBLOCK: a FIFO planted under an entry's or the lock's name must not hang the open."""


def default_ledger_dir() -> Path:
    """`$GPUHERD_LEDGER_DIR` if set, else /tmp/gpuherd-ledger."""
    return Path(os.environ.get("GPUHERD_LEDGER_DIR") or DEFAULT_DIR)


def _say(text: str) -> None:
    print(f"gpuherd: {text}", file=sys.stderr)


class Ledger:
    """The shared ledger in one directory; checks it (creating it 1777 if missing) at once."""

    def __init__(self, directory: Path, *, on_warning: Callable[[str], None] | None = None,
                 lock_timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self.directory = Path(directory)
        self.lock_timeout_s = lock_timeout_s
        self._warn = on_warning or _say
        self._warned: set[str] = set()
        self._create()
        dir_fd = self._open_dir()
        try:
            os.close(self._open_lock(dir_fd))
        finally:
            os.close(dir_fd)

    @contextmanager
    def locked(self) -> Iterator[LedgerView]:
        """Hold the ledger exclusively (every user's gpuherd waits) for a decide + reserve."""
        dir_fd = self._open_dir()
        try:
            lock_fd = self._open_lock(dir_fd)
            try:
                self._acquire(lock_fd)
                view = LedgerView(self, dir_fd)
                try:
                    yield view
                finally:
                    view._open = False
            finally:
                os.close(lock_fd)  # closing the descriptor releases the flock
        finally:
            os.close(dir_fd)

    def warn(self, text: str) -> None:
        """Say `text` once per ledger (a bad entry is seen at every decision)."""
        if text not in self._warned:
            self._warned.add(text)
            self._warn(text)

    def _create(self) -> None:
        try:
            os.mkdir(self.directory, 0o700)
        except FileExistsError:
            return
        except OSError as error:
            raise LedgerError(f"cannot create the ledger directory {self.directory}: "
                              f"{error.strerror}") from None
        # mkdir's mode passes through the umask; chmod sets the sticky, world-writable mode.
        os.chmod(self.directory, 0o1777)

    def _open_dir(self) -> int:
        where = self.directory
        try:
            if stat.S_ISLNK(os.lstat(where).st_mode):
                raise LedgerError(f"the ledger directory {where} is a symbolic link; refusing to "
                                  "follow it (remove it, or set GPUHERD_LEDGER_DIR)")
            dir_fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except NotADirectoryError:
            raise LedgerError(f"the ledger directory {where} is not a directory") from None
        except OSError as error:
            raise LedgerError(f"cannot open the ledger directory {where}: "
                              f"{error.strerror}") from None
        try:
            check_mode(where, os.fstat(dir_fd))
        except LedgerError:
            os.close(dir_fd)
            raise
        return dir_fd

    def _open_lock(self, dir_fd: int) -> int:
        path = self.directory / LOCK_NAME
        try:
            fd = os.open(LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            os.fchmod(fd, 0o644)  # readable by all: every user locks it through O_RDONLY
            os.close(fd)
        except FileExistsError:
            pass
        except OSError as error:
            raise LedgerError(f"cannot create {path}: {error.strerror}") from None
        try:
            fd = os.open(LOCK_NAME, _OPEN_READ, dir_fd=dir_fd)
        except OSError as error:
            what = ("is a symbolic link" if is_link(dir_fd, LOCK_NAME)
                    else f"cannot be opened: {error.strerror}")
            raise LedgerError(f"{path} {what}; refusing to use this ledger") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LedgerError(f"{path} is not a regular file; refusing to use this ledger")
        return fd

    def _acquire(self, lock_fd: int) -> None:
        # Polled rather than blocking, so a process that hangs holding the lock costs a clear
        # error after lock_timeout_s instead of a silent, endless wait.
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"{self.directory / LOCK_NAME} has been held by another process for "
                        f"{self.lock_timeout_s:g} s; is a gpuherd hung?") from None
                time.sleep(0.002)


class LedgerView:
    """The ledger while its lock is held: read every live entry, add or drop one's own."""

    def __init__(self, ledger: Ledger, dir_fd: int) -> None:
        self._ledger = ledger
        self._dir_fd = dir_fd
        self._open = True

    def live(self, now: float | None = None) -> list[Reservation]:
        """Every user's live reservations; own stale entries are deleted on the way."""
        return [entry.reservation for entry in self.entries(now)]

    def entries(self, now: float | None = None) -> list[LedgerEntry]:
        """Every user's live entries, with who wrote them, in file-name order."""
        self._check_open()
        now = time.time() if now is None else now
        me = os.geteuid()
        out: list[LedgerEntry] = []
        for name in sorted(os.listdir(self._dir_fd)):
            if name == LOCK_NAME:
                continue
            if name.startswith(TEMP_PREFIX):
                # Writers hold the lock, so an own temp file now is left from a crash.
                if owner_of(self._dir_fd, name) == me:
                    self._unlink(name)
                continue
            entry, owner = self._read(name)
            if entry is None:
                continue
            if now < entry.expires_at and alive(entry.pid, entry.pid_start_time):
                out.append(entry)
            elif owner == me:
                self._unlink(name)
        return out

    def reserve(self, gpu_uuid: str, bytes_: int, job: str, pid: int, pid_start_time: float,
                expires_at: float) -> None:
        """Write one reservation owned by this user (atomically: temp file, then rename)."""
        self._check_open()
        body = {"gpu_uuid": gpu_uuid, "bytes": bytes_, "uid": os.geteuid(), "pid": pid,
                "pid_start_time": float(pid_start_time), "expires_at": float(expires_at),
                "job": job}
        problem = invalid(body)
        if problem is not None:
            raise ValueError(f"bad reservation: {problem}")
        token = f"{os.geteuid()}-{secrets.token_hex(8)}"
        temp, final = f"{TEMP_PREFIX}{token}", f"{ENTRY_PREFIX}{token}{ENTRY_SUFFIX}"
        data = json.dumps(body, sort_keys=True).encode()
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=self._dir_fd)
            try:
                os.fchmod(fd, 0o644)
                os.write(fd, data)  # far below PIPE_BUF-sized limits: one write
            finally:
                os.close(fd)
            # No fsync: entries only matter while their process lives, and a crash of the
            # machine ends every process.
            os.rename(temp, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
        except OSError as error:
            self._unlink(temp)
            raise LedgerError(f"cannot write a reservation in {self._ledger.directory}: "
                              f"{error.strerror}") from None

    def release(self, job: str) -> int:
        """Delete this user's entries of `job` (live or not); returns how many."""
        self._check_open()
        me = os.geteuid()
        gone = 0
        for name in sorted(os.listdir(self._dir_fd)):
            if name.startswith(ENTRY_PREFIX) and name.endswith(ENTRY_SUFFIX):
                entry, owner = self._read(name, quiet=True)
                if entry is not None and owner == me and entry.job == job:
                    gone += self._unlink(name)
        return gone

    def _read(self, name: str, quiet: bool = False) -> tuple[LedgerEntry | None, int | None]:
        """An entry and its file's owner; (None, owner) with a warning when it is not one."""
        where = self._ledger.directory / name
        if not (name.startswith(ENTRY_PREFIX) and name.endswith(ENTRY_SUFFIX)):
            self._ledger.warn(f"{where}: not a ledger entry, ignored")
            return None, None
        try:
            fd = os.open(name, _OPEN_READ, dir_fd=self._dir_fd)
        except FileNotFoundError:
            return None, None
        except OSError as error:
            why = "a symbolic link" if is_link(self._dir_fd, name) else error.strerror
            if not quiet:
                self._ledger.warn(f"{where}: {why}, ignored")
            return None, None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                problem: str | None = "not a regular file"
            elif info.st_size > MAX_ENTRY_BYTES:
                problem = f"larger than {MAX_ENTRY_BYTES} bytes"
            else:
                body, problem = parse_entry(os.read(fd, MAX_ENTRY_BYTES + 1))
                if problem is None and body["uid"] != info.st_uid:
                    problem = f"says uid {body['uid']} but belongs to uid {info.st_uid}"
        except OSError as error:
            if not quiet:
                self._ledger.warn(f"{where}: cannot read: {error.strerror}, ignored")
            return None, None
        finally:
            os.close(fd)
        if problem is not None:
            if not quiet:
                self._ledger.warn(f"{where}: {problem}, ignored")
            return None, info.st_uid
        return LedgerEntry(name=name, **body), info.st_uid

    def _unlink(self, name: str) -> int:
        try:
            os.unlink(name, dir_fd=self._dir_fd)
            return 1
        except FileNotFoundError:
            return 0
        except OSError as error:
            self._ledger.warn(f"cannot delete {self._ledger.directory / name}: {error.strerror}")
            return 0

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("a LedgerView is used after its lock was released")

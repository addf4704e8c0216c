"""The reservation ledger every gpuherd of every user on the host shares, under its flocks.

A directory like /tmp (mode 1777) holds `ledger.lock` and one small JSON file per reservation,
written by its owner (temp name, then rename) and readable by all. Nothing read from it is ever
executed: an entry holds a GPU UUID, a byte count, who wrote it and until when it counts. An
entry counts only when what it claims can be checked (its process is its owner's, its bytes fit
the GPU, its expiry is within the longest grace period); the lock orders honest runners but
cannot stop one. The rules are in docs/queue.md, "What the ledger trusts".
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from gpuherd.present.format import visible
from gpuherd.queue.headroom import Reservation
from gpuherd.queue.ledger_files import (
    MAX_ENTRY_BYTES,
    LedgerEntry,
    LedgerError,
    Sightings,
    beyond_share,
    check_mode,
    create_shared_dir,
    doubt,
    invalid,
    is_link,
    judge_process,
    owner_of,
    parse_entry,
)
from gpuherd.queue.ledger_lock import LOCK_NAME, LOCK_TIMEOUT_S, LedgerLock

__all__ = ["Ledger", "LedgerEntry", "LedgerError", "LedgerView", "default_ledger_dir"]

DEFAULT_DIR = "/tmp/gpuherd-ledger"
ENTRY_PREFIX = "res-"
ENTRY_SUFFIX = ".json"
TEMP_PREFIX = ".tmp-"
MAX_NAMED = 100_000
"""Untrusted files remembered as already named; past this many, new ones are not named."""
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""O_NONBLOCK: a FIFO planted under an entry's name must not hang the open."""


def default_ledger_dir() -> Path:
    """`$GPUHERD_LEDGER_DIR` if set, else /tmp/gpuherd-ledger."""
    return Path(os.environ.get("GPUHERD_LEDGER_DIR") or DEFAULT_DIR)


def _say(text: str) -> None:
    print(f"gpuherd: {visible(text)}", file=sys.stderr)  # file names are others'


class Ledger:
    """The shared ledger in one directory; checks it (creating it 1777 if missing) at once.

    Raises:
        LedgerError: the directory cannot be used safely (a link, not a directory, owned by
            another user, writable by others without the sticky bit, not writable here).
    """

    def __init__(
        self,
        directory: Path,
        *,
        on_warning: Callable[[str], None] | None = None,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
    ) -> None:
        self.directory = Path(directory)
        self._warn = on_warning or _say
        self._warned: set[str] = set()
        self._named: set[str] = set()
        self.sightings = Sightings()
        self._lock = LedgerLock(self.directory, lock_timeout_s, self._warn)
        create_shared_dir(self.directory)
        dir_fd, owner = self._open_dir()
        try:
            self._lock.prepare(dir_fd, owner)
        finally:
            os.close(dir_fd)

    @contextmanager
    def locked(self) -> Iterator[LedgerView]:
        """Hold the ledger exclusively (every user's gpuherd waits) for a decide + reserve.

        When the lock cannot be used (another user holds it or squats its name), this says so
        once and yields the ledger anyway: a runner is never stopped by someone else's lock.
        """
        dir_fd, owner = self._open_dir()
        try:
            lock_fd = self._lock.take(dir_fd, owner)
            view = LedgerView(self, dir_fd)
            try:
                yield view
            finally:
                view._open = False
                if lock_fd is not None:
                    os.close(lock_fd)  # closing the descriptor releases the flock
        finally:
            os.close(dir_fd)

    def warn(self, text: str) -> None:
        """Say `text` once per ledger (a bad entry is seen at every decision)."""
        if text not in self._warned:
            self._warned.add(text)
            self._warn(text)

    def name_untrusted(self, doubts: Mapping[str, str]) -> None:
        """Say which files a scan did not trust: each file once, in one line per scan."""
        if len(self._named) >= MAX_NAMED:
            return
        new = [(name, why) for name, why in doubts.items() if name not in self._named]
        if not new:
            return
        self._named.update(name for name, _ in new)
        first, why = new[0]
        if len(new) == 1:
            self._warn(f"ledger: {self.directory / first}: {why}; not counted")
        else:
            self._warn(
                f"ledger: {len(new)} files in {self.directory} are not counted (the "
                f"first, {first}: {why}); each is named once"
            )
        if len(self._named) >= MAX_NAMED:
            self._warn(
                f"ledger: more than {MAX_NAMED} untrusted files in {self.directory}; "
                "new ones are not counted and no longer named"
            )

    def _open_dir(self) -> tuple[int, int]:
        """The directory's descriptor and owner, once it is known to be safe to use."""
        where = self.directory
        try:
            if stat.S_ISLNK(os.lstat(where).st_mode):
                raise LedgerError(
                    f"the ledger directory {where} is a symbolic link; refusing to "
                    "follow it (remove it, or set GPUHERD_LEDGER_DIR)"
                )
            dir_fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except NotADirectoryError:
            raise LedgerError(f"the ledger directory {where} is not a directory") from None
        except OSError as error:
            raise LedgerError(
                f"cannot open the ledger directory {where}: {error.strerror}"
            ) from None
        try:
            info = os.fstat(dir_fd)
            check_mode(where, info)
        except LedgerError:
            os.close(dir_fd)
            raise
        return dir_fd, info.st_uid


class LedgerView:
    """The ledger while its lock is held: read every live entry, add or drop one's own."""

    def __init__(self, ledger: Ledger, dir_fd: int) -> None:
        self._ledger = ledger
        self._dir_fd = dir_fd
        self._open = True

    def live(
        self, now: float | None = None, gpu_totals: Mapping[str, int] | None = None
    ) -> list[Reservation]:
        """Every user's live, trusted reservations; own stale entries are deleted on the way."""
        return [entry.reservation for entry in self.entries(now, gpu_totals)]

    def entries(
        self, now: float | None = None, gpu_totals: Mapping[str, int] | None = None
    ) -> list[LedgerEntry]:
        """Every user's live, trusted entries, with who wrote them, in file-name order.

        Args:
            now: the time expiry is judged at (default: now).
            gpu_totals: total memory per GPU UUID, where known: an entry reserving more than
                its GPU holds is not trusted.
        """
        self._check_open()
        now = time.time() if now is None else now
        me = os.geteuid()
        out: list[LedgerEntry] = []
        doubts: dict[str, str] = {}
        names = sorted(os.listdir(self._dir_fd))
        for name in names:
            if name == LOCK_NAME:
                continue
            if name.startswith(TEMP_PREFIX):
                # Writers hold the lock, so an own temp file now is left from a crash.
                if owner_of(self._dir_fd, name) == me:
                    self._unlink(name)
                continue
            entry, owner, problem = self._read(name, gpu_totals or {}, now)
            if problem is not None:
                doubts[name] = problem
            if entry is None:
                continue
            alive, problem = (
                (False, None)
                if not now < entry.expires_at
                else judge_process(entry.pid, entry.pid_start_time, entry.uid)
            )
            if problem is not None:
                doubts[name] = problem
            elif alive:
                out.append(entry)
            elif owner == me:
                self._unlink(name)
        beyond = beyond_share(out, gpu_totals or {})
        self._ledger.sightings.forget_gone(set(names))
        self._ledger.name_untrusted(doubts | beyond)
        return [entry for entry in out if entry.name not in beyond]

    def reserve(
        self,
        gpu_uuid: str,
        bytes_: int,
        job: str,
        pid: int,
        pid_start_time: float,
        expires_at: float,
    ) -> None:
        """Write one reservation owned by this user (atomically: temp file, then rename).

        A need of 0 bytes holds nothing, so nothing is written for it.
        """
        self._check_open()
        if bytes_ == 0:
            return
        body = {
            "gpu_uuid": gpu_uuid,
            "bytes": bytes_,
            "uid": os.geteuid(),
            "pid": pid,
            "pid_start_time": float(pid_start_time),
            "expires_at": float(expires_at),
            "job": job,
        }
        problem = invalid(body)
        if problem is not None:
            raise ValueError(f"bad reservation: {problem}")
        token = f"{os.geteuid()}-{secrets.token_hex(8)}"
        temp, final = f"{TEMP_PREFIX}{token}", f"{ENTRY_PREFIX}{token}{ENTRY_SUFFIX}"
        data = json.dumps(body, sort_keys=True).encode()
        try:
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=self._dir_fd,
            )
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
            raise LedgerError(
                f"cannot write a reservation in {self._ledger.directory}: {error.strerror}"
            ) from None

    def release(self, job: str) -> int:
        """Delete this user's entries of `job` (live or not); returns how many."""
        self._check_open()
        me = os.geteuid()
        gone = 0
        for name in sorted(os.listdir(self._dir_fd)):
            if name.startswith(ENTRY_PREFIX) and name.endswith(ENTRY_SUFFIX):
                entry, owner, _ = self._read(name, {}, time.time())
                if entry is not None and owner == me and entry.job == job:
                    gone += self._unlink(name)
        return gone

    def _read(
        self, name: str, gpu_totals: Mapping[str, int], now: float
    ) -> tuple[LedgerEntry | None, int | None, str | None]:
        """An entry and its file's owner, or why the file is not a trusted entry."""
        if not (name.startswith(ENTRY_PREFIX) and name.endswith(ENTRY_SUFFIX)):
            return None, None, "not a ledger entry"
        try:
            fd = os.open(name, _OPEN_READ, dir_fd=self._dir_fd)
        except FileNotFoundError:
            return None, None, None
        except OSError as error:
            why = "a symbolic link" if is_link(self._dir_fd, name) else error.strerror
            return None, None, why
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                problem: str | None = "not a regular file"
            elif info.st_size > MAX_ENTRY_BYTES:
                problem = f"larger than {MAX_ENTRY_BYTES} bytes"
            else:
                body, problem = parse_entry(os.read(fd, MAX_ENTRY_BYTES + 1))
                if problem is None and body["uid"] != info.st_uid:
                    problem = f"it says uid {body['uid']} but belongs to uid {info.st_uid}"
                if problem is None:
                    seen = self._ledger.sightings.first(name, info.st_ino, now)
                    problem = doubt(body, min(info.st_ctime, seen), gpu_totals)
        except OSError as error:
            return None, None, f"cannot read: {error.strerror}"
        finally:
            os.close(fd)
        if problem is not None:
            return None, info.st_uid, problem
        return LedgerEntry(name=name, **body), info.st_uid, None

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

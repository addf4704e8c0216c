"""The `.lock` of a session directory: one recorder per directory, stale locks taken over."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from collectors.machine.process_alive import process_alive
from collectors.session.rows import SessionError
from collectors.session.session_format import LOCK_FILE
from gpuherd.common.safe_files import Directory, UnsafeFileError

_MODE = 0o600
"""Only its owner can open it: anyone who could read it could also `flock` it and so stop
every recorder of the directory."""


class SessionLockedError(SessionError):
    """Another recorder holds the directory's `.lock`."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


class SessionLock:
    """The `.lock` of a session directory.

    Created with `O_CREAT | O_EXCL | O_NOFOLLOW` through the directory's descriptor, holding
    `pid host`, and kept under `flock` for the writer's life. The kernel drops the `flock` when
    the holder dies (even by `kill -9`), so a lock file nobody holds is stale whatever pid it
    names (a pid may have been reused). An existing `.lock` is reopened only when it is a
    regular file of this user, never through a link.
    """

    def __init__(self, directory: Path, opened: Directory | None = None) -> None:
        self.path = directory / LOCK_FILE
        self._directory = opened
        self._own_directory = opened is None
        self._fd: int | None = None

    def _dir(self) -> Directory:
        if self._directory is None:
            self._directory = Directory(self.path.parent)
        return self._directory

    def held_message(self) -> str | None:
        """Why the directory is busy when a live recorder holds `.lock`; `None` otherwise.

        Writes nothing: used to word a refusal before anything is created.
        """
        try:
            fd = self._dir().open_existing(LOCK_FILE, os.O_RDONLY)
        except OSError:
            return None  # none, or not one of ours: acquire() says what it is
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._held_message(os.pread(fd, 256, 0).decode("utf-8", "replace").strip())
        except OSError:
            return None
        finally:
            os.close(fd)
        return None

    def acquire(self) -> str | None:
        """Take the lock; return a warning when a stale one was taken over.

        Raises:
            SessionLockedError: a live recorder holds it, or it is not a file of this user.
            OSError: the lock file cannot be created (the caller words it).
        """
        directory = self._dir()
        for _ in range(5):
            try:
                fd, created = directory.create(LOCK_FILE, os.O_RDWR, _MODE), True
            except FileExistsError:
                try:
                    fd, created = directory.open_existing(LOCK_FILE, os.O_RDWR), False
                except FileNotFoundError:
                    continue  # released between our two calls: try creating again
                except OSError as error:
                    raise SessionLockedError(self._foreign_message(error)) from None
            try:
                took = self._hold(fd, created)
            except BaseException:
                os.close(fd)
                raise
            if took is not None:
                self._fd = fd
                return took or None
            os.close(fd)
        raise SessionLockedError(f"{self.path} keeps changing: another recorder is starting there")

    def _hold(self, fd: int, created: bool) -> str | None:
        """Lock `fd`; `None` means the path was replaced meanwhile, retry; `""` means fresh."""
        previous = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionLockedError(self._held_message(previous)) from None
        except OSError:
            # No flock on this filesystem: fall back to asking whether the pid still runs.
            if not created and _holder_alive(previous):
                raise SessionLockedError(self._held_message(previous)) from None
        named = self._dir().lstat(LOCK_FILE)
        if named is None or os.fstat(fd).st_ino != named.st_ino:
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        os.fsync(fd)
        if created:
            return ""
        pid = previous.split()[0] if previous else "unknown"
        return f"took over the stale lock {self.path} of a recorder that is gone (pid {pid})"

    def _held_message(self, previous: str) -> str:
        parts = previous.split()
        who = f"pid {parts[0]}" if parts else "another process"
        if len(parts) > 1 and parts[1] != socket.gethostname():
            who += f" on {parts[1]}"
        return (
            f"{self.path.parent} is being recorded by {who} (see {self.path}); record into "
            "another directory or stop that recorder first"
        )

    def _foreign_message(self, error: OSError) -> str:
        reason = (
            error.strerror
            if isinstance(error, UnsafeFileError)
            else f"cannot open {self.path}: {error.strerror}"
        )
        return (
            f"{reason}; another user may be recording into {self.path.parent}, or left it "
            "there: record into another directory, or remove it once no recorder runs there"
        )

    def release(self) -> None:
        """Remove the lock file and drop the lock."""
        if self._fd is not None:
            try:
                named = self._dir().lstat(LOCK_FILE)
                if named is not None and os.fstat(self._fd).st_ino == named.st_ino:
                    self._dir().unlink(LOCK_FILE)
            except OSError:
                pass  # the directory went read-only: the flock still ends below
            os.close(self._fd)
            self._fd = None
        if self._own_directory and self._directory is not None:
            self._directory.close()
            self._directory = None


def _holder_alive(content: str) -> bool:
    parts = content.split()
    if not parts or not parts[0].isdigit():
        return False
    if len(parts) > 1 and parts[1] != socket.gethostname():
        return True  # cannot ask another machine; assume it is still recording
    return process_alive(int(parts[0]))

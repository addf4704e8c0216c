"""Files written into a directory other users may write to: through its descriptor, never a link.

gpuherd often runs as root (`sudo gpuherd record`, `note` on a shared checkout) in directories
that other people can write to. A path opened by name follows whatever link another user put
there a moment before, so every writer here opens the directory once and then works relative
to that descriptor: new names are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, temporary names
are unpredictable, renames use `src_dir_fd`/`dst_dir_fd`, and modes and owners are set with
`fchmod`/`fchown` on the open file. Standard library only (the command supervisor imports it).
"""

from __future__ import annotations

import errno
import os
import pwd
import secrets
import stat
from pathlib import Path
from types import TracebackType

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_CREAT | os.O_EXCL | _NOFOLLOW


class UnsafeFileError(OSError):
    """A name where a file goes holds something gpuherd must not write through.

    An `OSError`, so every writer's existing handling words it; `strerror` is the whole reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EPERM, reason)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a symbolic link", "a directory", ...)."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def user_name(uid: int) -> str:
    """`alice (uid 1001)`, or `uid 1001` for a uid without an account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def others_may_write_problem(path: str | os.PathLike[str], info: os.stat_result) -> str | None:
    """Why a directory lets other users replace what gpuherd writes in it, or `None`.

    World-writable without the sticky bit: anyone may rename, delete or plant files there.
    With the sticky bit (`/tmp`), others may add names but not touch gpuherd's files.
    """
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        return (f"{path} is writable by every user (mode {mode:04o}) without the sticky bit, so "
                f"anyone can replace its files while gpuherd writes them; run `chmod o-w {path}` "
                "(or `chmod +t`), or use a directory you own")
    return None


class Directory:
    """One directory opened once; files in it are created, replaced and changed through it."""

    def __init__(self, path: str | os.PathLike[str], *, no_links: bool = False) -> None:
        """Open `path`, which must be a directory.

        Args:
            path: the directory; a link to one is followed, once, here.
            no_links: walk an absolute, resolved `path` from `/` one name at a time, never
                through a link: a directory on the way that another user swapped for a link
                since the path was resolved is refused (`ELOOP`), not followed.

        Raises:
            OSError: it cannot be opened, or is not a directory (`NotADirectoryError`).
        """
        self.path = Path(path)
        self.fd: int | None = (_walk(self.path) if no_links else
                               os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _fd(self) -> int:
        if self.fd is None:
            raise ValueError(f"{self.path} is closed")
        return self.fd

    def stat(self) -> os.stat_result:
        """The directory's own status (of what was opened, whatever the path names now)."""
        return os.fstat(self._fd())

    def lstat(self, name: str) -> os.stat_result | None:
        """`name`'s status, links not followed; `None` when nothing has that name."""
        try:
            return os.stat(name, dir_fd=self._fd(), follow_symlinks=False)
        except FileNotFoundError:
            return None

    def irregular(self, names: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
        """The first of `names` that exists as something other than a regular file, and what."""
        for name in names:
            info = self.lstat(name)
            if info is not None and not stat.S_ISREG(info.st_mode):
                return name, kind_of(info.st_mode)
        return None

    def open(self, name: str, flags: int, mode: int = 0o644) -> int:
        """Open `name` with `flags`, never through a link (`ELOOP` when it is one)."""
        return os.open(name, flags | _NOFOLLOW, mode, dir_fd=self._fd())

    def create(self, name: str, flags: int = os.O_WRONLY, mode: int = 0o644) -> int:
        """Create `name`, which must not exist yet (not even as a link); its descriptor."""
        try:
            return os.open(name, flags | _NEW, mode, dir_fd=self._fd())
        except FileExistsError:
            info = self.lstat(name)
            if info is not None and not stat.S_ISREG(info.st_mode):
                raise UnsafeFileError(f"{self.path / name} is {kind_of(info.st_mode)}; gpuherd "
                                      "does not write through it") from None
            raise

    def open_existing(self, name: str, flags: int) -> int:
        """Open `name` if it is a regular file of this user; never through a link.

        Raises:
            UnsafeFileError: a link, a pipe, a device, or a file of another user.
        """
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, dir_fd=self._fd())
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafeFileError(f"{self.path / name} is a symbolic link; gpuherd does not "
                                      "write through it") from None
            raise
        info = os.fstat(fd)
        problem = (None if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode))
        if problem is None and info.st_uid != os.geteuid():
            problem = f"a file of uid {info.st_uid}, not of this user"
        if problem is not None:
            os.close(fd)
            raise UnsafeFileError(f"{self.path / name} is {problem}; gpuherd does not write to it")
        os.set_blocking(fd, True)
        return fd

    def append(self, name: str, mode: int = 0o644) -> int:
        """`name` opened for appending: created, or this user's own regular file reopened."""
        flags = os.O_WRONLY | os.O_APPEND
        try:
            return self.create(name, flags, mode)
        except FileExistsError:
            return self.open_existing(name, flags)

    def write_atomic(self, name: str, data: bytes, mode: int | None = None,
                     owner: tuple[int, int] | None = None) -> None:
        """Replace `name` with `data` whole: an unpredictable temporary name, fsync, rename.

        An interrupt or a full disk leaves the old file or the new one, never a part, and no
        temporary file. `mode` and `owner` (uid, gid) are set on the open file, not by path.
        """
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = self.create(tmp, os.O_WRONLY, 0o666 if mode is None else 0o600)
        try:
            try:
                _write_all(fd, data)
                if mode is not None:
                    os.fchmod(fd, mode)
                if owner is not None:
                    os.fchown(fd, *owner)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=self._fd(), dst_dir_fd=self._fd())
        except BaseException:
            self.unlink(tmp)
            raise
        self.sync()

    def unlink(self, name: str) -> bool:
        """Remove `name` (a link itself, never its target); False when it was not there."""
        try:
            os.unlink(name, dir_fd=self._fd())
        except FileNotFoundError:
            return False
        return True

    def sync(self) -> None:
        """Sync the directory to disk: creations, renames and removals in it survive a crash."""
        os.fsync(self._fd())

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _walk(path: Path) -> int:
    if not path.is_absolute():
        raise ValueError(f"{path} is not an absolute path")
    flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
    fd = os.open("/", flags)
    try:
        for name in path.parts[1:]:
            step = os.open(name, flags, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

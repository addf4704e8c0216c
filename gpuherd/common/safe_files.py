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
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
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
        return (
            f"{path} is writable by every user (mode {mode:04o}) without the sticky bit, so "
            f"anyone can replace its files while gpuherd writes them; run `chmod o-w {path}` "
            "(or `chmod +t`), or use a directory you own"
        )
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
        self.fd: int | None = (
            _walk(self.path)
            if no_links
            else os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        )

    def duplicate(self) -> Directory:
        """A second handle on the same open directory (not its path), closed on its own."""
        other = Directory.__new__(Directory)
        other.path, other.fd = self.path, os.dup(self._fd())
        return other

    def __enter__(self) -> Directory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
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
                raise UnsafeFileError(
                    f"{self.path / name} is {kind_of(info.st_mode)}; gpuherd "
                    "does not write through it"
                ) from None
            raise

    def open_existing(self, name: str, flags: int) -> int:
        """Open `name` if it is a regular file of this user; never through a link.

        Raises:
            UnsafeFileError: a link, a pipe, a device, a file of another user, or one with
                more than one hard link (its other names may be anywhere).
        """
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, dir_fd=self._fd())
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafeFileError(
                    f"{self.path / name} is a symbolic link; gpuherd does not write through it"
                ) from None
            raise
        info = os.fstat(fd)
        problem = None if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode)
        if problem is None and info.st_uid != os.geteuid():
            problem = f"a file of uid {info.st_uid}, not of this user"
        if problem is None and info.st_nlink != 1:
            # A hard link another user made to a file of ours (where the kernel lets her:
            # fs.protected_hardlinks=0): writing it would write that file, wherever it is.
            problem = f"a file with {info.st_nlink} hard links, not one gpuherd created"
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

    def write_atomic(
        self, name: str, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None
    ) -> None:
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


def trusted_owners() -> set[int]:
    """Owners whose directories this user may write in: root, itself, and the user who ran sudo."""
    owners = {0, os.geteuid()}
    sudo_uid = os.environ.get("SUDO_UID", "")
    if os.geteuid() == 0 and sudo_uid.isdigit():
        owners.add(int(sudo_uid))
    return owners


def swappable_path_problem(directory: Directory) -> str | None:
    """Why another user could swap `directory`'s path for a link to elsewhere, or `None`.

    Writers that reopen a file by path (the command's supervisor, the summary) trust that the
    path still names the directory that was checked. That holds only when no other user can
    rename anything on the way to it: every directory above it (walked up through `..` from
    the open descriptor, so the real ones, whatever the path says) must be owned by a trusted
    owner (`trusted_owners`) and not writable by group or others without the sticky bit; and
    every symbolic link in the path as given must be a trusted owner's, in such a directory.
    OpenSSH's StrictModes asks the same of `~/.ssh`; the sticky bit of `/tmp` is allowed here.

    Only root is held to it: root writes by privilege, so a swapped path could turn its writes
    onto any file. An ordinary user's writes can only reach files she may write anyway, and
    her runs often live below a project directory a colleague or her group owns; refusing
    those would refuse the common case to guard a rare one.
    """
    if os.geteuid() != 0:
        return None
    trusted = trusted_owners()
    problem = _parents_problem(directory, trusted)
    return problem or _links_problem(Path(os.path.abspath(directory.path)), trusted, 0)


def _parents_problem(directory: Directory, trusted: set[int]) -> str | None:
    names = list(Path(os.path.realpath(directory.path)).parents)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    child, fd = directory.stat(), os.open("..", flags, dir_fd=directory._fd())
    try:
        for depth in range(4096):
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) == (child.st_dev, child.st_ino):
                return None  # `/`, whose `..` is itself
            name = names[depth] if depth < len(names) else f"a directory above {directory.path}"
            problem = _directory_problem(name, info, trusted)
            if problem is not None:
                return problem
            child, step = info, os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = step
    finally:
        os.close(fd)
    return None


def _links_problem(path: Path, trusted: set[int], depth: int) -> str | None:
    """The first link of `path` (and of the links it leads to) others could point elsewhere."""
    if depth > 40:
        return f"{path} goes through too many symbolic links"
    for prefix in [*reversed(path.parents), path][1:]:
        try:
            info = os.lstat(prefix)
        except OSError:
            return None  # not there yet: `record` creates it, below what was checked
        if not stat.S_ISLNK(info.st_mode):
            continue
        if info.st_uid not in trusted:
            return (
                f"{prefix} is a symbolic link of uid {info.st_uid}, who can point it "
                "elsewhere while gpuherd writes; give the real path instead"
            )
        parent = os.stat(prefix.parent)
        problem = _directory_problem(prefix.parent, parent, trusted)
        target = prefix.parent / os.readlink(prefix)
        problem = problem or _links_problem(Path(os.path.abspath(target)), trusted, depth + 1)
        if problem is not None:
            return problem
    return None


def _directory_problem(
    path: str | os.PathLike[str], info: os.stat_result, trusted: set[int]
) -> str | None:
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in trusted:
        return (
            f"{path} belongs to uid {info.st_uid}, who can rename what is in it and put a "
            "link in its place while gpuherd writes; use a path whose directories only "
            "root or you own"
        )
    writable = mode & stat.S_IWOTH or (mode & stat.S_IWGRP and info.st_gid != 0)
    if writable and not mode & stat.S_ISVTX:
        return (
            f"{path} is writable by other users (mode {mode:04o}) without the sticky bit, "
            "so they can put a link in place of what is in it while gpuherd writes; run "
            f"`chmod go-w {path}`, or use a path whose directories only root or you own"
        )
    return None


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
        view = view[os.write(fd, view) :]

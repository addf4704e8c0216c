"""The example file side of the note: reading it, setting the note, rewriting it in place."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from gpuherd.common.safe_files import Directory, trusted_owners
from gpuherd.note.note import BLOCK, Note, NoteError
from gpuherd.note.yaml_edit import MAX_TEXT_CHARS, YamlEditError, set_block

MAX_EXAMPLE_BYTES = MAX_TEXT_CHARS
"""Example files are a few KB; a larger one is refused before it is parsed."""
BACKUP_SUFFIX = ".gpuherd-backup"


class NoteWriteError(NoteError):
    """Writing failed part way (a full disk); the message says what was kept."""


def _decode(path: Path, raw: bytes) -> str:
    if len(raw) > MAX_EXAMPLE_BYTES:
        raise NoteError(
            f"{path}: larger than {MAX_EXAMPLE_BYTES >> 20} MiB; gpuherd note edits "
            "example files up to that size"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NoteError(f"{path}: not UTF-8 text (byte {error.start})") from None


def _read(path: Path) -> tuple[bytes, str]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_EXAMPLE_BYTES + 1)
    except OSError as error:
        raise NoteError(f"{path}: cannot read: {error.strerror}") from None
    return raw, _decode(path, raw)


def _edit(path: Path, text: str, note: Note) -> str:
    try:
        return set_block(text, BLOCK, note.values())
    except YamlEditError as error:
        raise NoteError(f"{path}: {error.msg}") from None


def updated_text(path: Path, note: Note) -> tuple[str, str]:
    """The file's current text and its text with the note set; raises `NoteError`."""
    _, text = _read(path)
    return text, _edit(path, text, note)


def diff(path: Path, old: str, new: str) -> str:
    """A unified diff between the two texts of `path`."""
    name = str(path).lstrip("/")
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def backup_path(target: Path) -> Path:
    """Where the file's old content is kept while it is being rewritten."""
    return target.with_name(f"{target.name}{BACKUP_SUFFIX}")


def writable_problem(path: Path, info: os.stat_result) -> str | None:
    """Why `path` must not be written, or `None`.

    The mode bits are checked first: as root, `os.access` and the kernel let any file be
    written, but a file with no write bit (0444) was made read-only on purpose.
    """
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o222:
        return (
            f"read-only (mode {mode:04o}); make it writable (chmod u+w) to let gpuherd "
            "write the note"
        )
    if not os.access(path, os.W_OK):
        return "not writable by this user (permission denied)"
    return None


def write_note(path: Path, note: Note) -> bool:
    """Write the note into `path` in place; False when nothing changed.

    The file is rewritten through its own inode (open, write, truncate, fsync), so its owner,
    group, mode, hard links and extended attributes stay as they were. Before that, its old
    content is written and synced to `<name>.gpuherd-backup` beside it, and removed once the
    new content is on disk: a crash in between leaves either the old file, or a half-written
    one next to a complete copy of the old. A backup left over from such a crash makes the
    next run stop and say so, rather than overwrite the only good copy. Keeping the old content
    (not the new) is the choice because the new one can always be made again from the session.

    The directory may belong to another user (root noting someone's example): it is opened
    once, without following links, and the file, the backup and the backup's owner are all
    handled through descriptors, so a link swapped in meanwhile is refused, never followed.
    As root, a file with more than one hard link is refused unless it and its directory are
    root's or the sudo caller's (`_refuse_foreign_hard_links`).
    """
    target = Path(os.path.realpath(path))
    try:
        directory = Directory(target.parent, no_links=True)
    except OSError as error:
        raise NoteError(f"{path}: cannot open its directory: {error.strerror}") from None
    with directory:
        return _write_in(directory, path, target, note)


def _write_in(directory: Directory, path: Path, target: Path, note: Note) -> bool:
    backup = backup_path(target)
    if directory.lstat(backup.name) is not None:
        raise NoteError(
            f"{backup} exists: an earlier `gpuherd note` stopped while rewriting "
            f"{target}, and this is the file as it was before. Compare the two, keep "
            "the right one, delete the backup, then run again"
        )
    info = directory.lstat(target.name)
    if info is None:
        raise NoteError(f"{path}: cannot read: No such file or directory")
    problem = writable_problem(target, info)
    if problem is not None:
        raise NoteError(f"{path}: {problem}")
    try:
        fd = directory.open(target.name, os.O_RDWR)
    except OSError as error:
        raise NoteError(f"{path}: cannot open for writing: {error.strerror}") from None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise NoteError(f"{path}: it was replaced while being opened; run again")
        _refuse_foreign_hard_links(path, opened, directory)
        raw = _read_fd(fd, MAX_EXAMPLE_BYTES + 1)
        old = _decode(path, raw)
        new = _edit(path, old, note)
        if new == old:
            return False
        _keep(directory, backup, raw, info)
        _rewrite(fd, directory, target, backup, raw, new.encode("utf-8"))
    finally:
        os.close(fd)
    return True


def _refuse_foreign_hard_links(path: Path, opened: os.stat_result, directory: Directory) -> None:
    """As root, refuse a hard-linked file unless it and its directory are trusted owners'.

    Its other names may be anywhere: a hard link another user made (in her directory, to a
    file of root's, where fs.protected_hardlinks=0 lets her) would get root's rewrite. A user's
    own hard-linked example in her own directory (or root's, or the sudo caller's) is rewritten
    as before, through its inode; without root, the kernel's permissions are the guard.
    """
    if os.geteuid() != 0 or opened.st_nlink == 1:
        return
    trusted = trusted_owners()
    if opened.st_uid not in trusted or directory.stat().st_uid not in trusted:
        raise NoteError(
            f"{path}: it has {opened.st_nlink} hard links, and it or its "
            "directory belongs to another user, who may have linked it to a file "
            "root alone may write; run gpuherd as the file's owner, or copy it first"
        )


def _read_fd(fd: int, limit: int) -> bytes:
    parts = []
    while limit > 0 and (part := os.read(fd, min(limit, 1 << 16))):
        parts.append(part)
        limit -= len(part)
    return b"".join(parts)


def _keep(directory: Directory, backup: Path, raw: bytes, info: os.stat_result) -> None:
    """Write the old content to the backup, synced, readable by the file's owner.

    Created new (never through a link) and given to the owner with `fchown` on its
    descriptor: a chown by path would follow a link the directory's owner put there in
    between, and give her any file of the system.
    """
    created = False
    try:
        fd = directory.create(backup.name, os.O_WRONLY, stat.S_IMODE(info.st_mode))
        created = True
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
            if os.geteuid() == 0:
                os.fchown(out.fileno(), info.st_uid, info.st_gid)  # she can read and delete it
        directory.sync()
    except OSError as error:
        if created:
            directory.unlink(backup.name)
        raise NoteError(
            f"{backup}: cannot write the backup copy: {error.strerror}; the file is left untouched"
        ) from None


def _rewrite(
    fd: int, directory: Directory, target: Path, backup: Path, old: bytes, new: bytes
) -> None:
    try:
        _overwrite(fd, new)
    except OSError as error:
        try:
            _overwrite(fd, old)
        except OSError:
            raise NoteWriteError(
                f"{target}: cannot write: {error.strerror}; the file may be "
                f"half-written, and {backup} holds it as it was"
            ) from None
        directory.unlink(backup.name)
        raise NoteWriteError(
            f"{target}: cannot write: {error.strerror}; the file is as it was"
        ) from None
    directory.unlink(backup.name)
    directory.sync()


def _overwrite(fd: int, data: bytes) -> None:
    """Write `data` over the file from its start (unbuffered), cut the rest, sync."""
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.ftruncate(fd, len(data))
    os.fsync(fd)

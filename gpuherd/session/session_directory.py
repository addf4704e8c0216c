"""Whether a session directory is safe to record into when other users can write to it."""

from __future__ import annotations

import os

from collectors.session.rows import SessionError
from collectors.session.session_format import SESSION_FILES
from gpuherd.common.safe_files import (
    Directory,
    others_may_write_problem,
    swappable_path_problem,
    trusted_owners,
    user_name,
)


class SessionUnsafeError(SessionError):
    """The directory lets another user steer what is written (a planted link, others' writes)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


def refuse_unsafe(directory: Directory) -> None:
    """Refuse a directory where another user could steer or replace what is written."""
    info = directory.stat()
    problem = others_may_write_problem(directory.path, info)
    if problem is None and os.geteuid() == 0 and info.st_uid not in trusted_owners():
        problem = (
            f"{directory.path} belongs to {user_name(info.st_uid)}, and root writes "
            "there only by privilege; record into a directory root owns (or your own, "
            "under sudo), or run gpuherd as that user"
        )
    if problem is None:
        found = directory.irregular(SESSION_FILES)
        if found is not None:
            name, kind = found
            problem = (
                f"{directory.path / name} is {kind} where gpuherd writes its {name}; "
                "remove it, or record into a new directory you own"
            )
    if problem is not None:
        raise SessionUnsafeError(f"refusing to record: {problem}")


def refuse_swappable_path(directory: Directory) -> None:
    """Refuse a directory whose path another user could swap for a link while it is written.

    The command's supervisor and the summary reopen their files by path; see
    `gpuherd.common.safe_files.swappable_path_problem`.
    """
    problem = swappable_path_problem(directory)
    if problem is not None:
        raise SessionUnsafeError(f"refusing to record into {directory.path}: {problem}")

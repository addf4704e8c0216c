"""Root writing below directories another user controls: paths swapped, files hard-linked.

The supervisor and the summary reopen session files by path. When another user owns (or may
write to) a directory on the way, she can rename the session directory away mid-recording and
put a link to a directory of root's in its place, so `record` refuses such a path before it
writes anything. A hard link she plants under a session file's name would get root's appends.
A second real user (`OTHER_UID`, through `setpriv`) does what she can; root runs the real code.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.samples import HostSample
from gpuherd.note.note import NoteError
from gpuherd.note.note_file import write_note
from gpuherd.session.session import SessionWriteError, SessionWriter
from tests.privileges import OTHER_UID, as_other_user
from tests.queue_helpers import python_for_everyone
from tests.unit.test_files_planted_links import (
    ROOT,
    SECRET,
    as_her,
    box,
    gpuherd,
    her_directory,
    unchanged,
)
from tests.unit.test_note import EXAMPLES, NOTE, training_session

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attack is another user against root (CI runs as root)"
)
__all__ = ["box"]  # the fixture, imported to be used here


def roots_directory(path: Path, mode: int = 0o755, group: int = 0) -> Path:
    path.mkdir()
    os.chown(path, 0, group)
    path.chmod(mode)
    return path


def secret_file(box: Path, name: str = "target") -> Path:
    target = box / "secret" / name
    target.write_bytes(SECRET)
    target.chmod(0o600)
    return target


def test_record_refuses_a_directory_of_roots_inside_hers(box: Path) -> None:
    # `sudo gpuherd record /tmp/her/run`: `run` is root's, so the directory itself passes,
    # but she could rename it away mid-recording and put `run -> /etc` in its place.
    run = roots_directory(her_directory(box / "her", 0o755) / "run")
    out = gpuherd("record", str(run), "--", "true")
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"gpuherd: refusing to record into {run}: {box / 'her'} belongs to "
        f"uid {OTHER_UID}, who can rename what is in it and put a link in its "
        "place while gpuherd writes; use a path whose directories only root "
        "or you own\n"
    )
    assert list(run.iterdir()) == []


def test_record_refuses_a_new_directory_two_levels_below_hers(box: Path) -> None:
    run = her_directory(box / "her", 0o755) / "deep" / "run"
    out = gpuherd("record", str(run), "--", "true")
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1 and f"{box / 'her'} belongs to" in out.stderr
    assert not any(run.iterdir())


@pytest.mark.parametrize(
    ("mode", "group", "refused"),
    [
        (0o777, 0, True),  # anyone renames `run`
        (0o775, OTHER_UID, True),  # her group may
        (0o775, 0, False),  # root's group only
        (0o1777, 0, False),  # /tmp: she may add names, not rename root's `run`
        (0o755, 0, False),
    ],
)
def test_record_weighs_who_may_write_the_parent(
    box: Path, mode: int, group: int, refused: bool
) -> None:
    parent = roots_directory(box / "parent", mode, group)
    run = roots_directory(parent / "run")
    out = gpuherd("record", str(run), "--", "true")
    if refused:
        assert out.returncode == 2, out.stderr
        assert out.stderr.endswith(
            f"{parent} is writable by other users (mode {mode:04o}) "
            "without the sticky bit, so they can put a link in place of "
            f"what is in it while gpuherd writes; run `chmod go-w "
            f"{parent}`, or use a path whose directories only root or "
            "you own\n"
        ), out.stderr
        assert list(run.iterdir()) == []
    else:
        assert out.returncode == 0, out.stderr
        assert (run / "summary.md").is_file()


def test_record_under_sudo_below_the_callers_own_directory(box: Path) -> None:
    run = roots_directory(her_directory(box / "her", 0o755) / "run")
    out = gpuherd("record", str(run), "--", "true", env={"SUDO_UID": str(OTHER_UID)})
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("hers", [True, False])
def test_record_refuses_a_path_through_her_link(box: Path, hers: bool) -> None:
    # A link she owns in a sticky directory is hers to repoint at any moment; root's is not.
    tmp = roots_directory(box / "tmp", 0o1777)
    real = roots_directory(box / "real")
    link = tmp / "link"
    if hers:
        as_her(f"ln -s {real} {link}")
    else:
        link.symlink_to(real)
    out = gpuherd("record", str(link / "run"), "--", "true")
    if hers:
        assert out.returncode == 2, out.stderr
        assert out.stderr == (
            f"gpuherd: refusing to record into {link / 'run'}: {link} is a "
            f"symbolic link of uid {OTHER_UID}, who can point it elsewhere "
            "while gpuherd writes; give the real path instead\n"
        )
        assert list((real / "run").iterdir()) == []
    else:
        assert out.returncode == 0, out.stderr
        assert (real / "run" / "summary.md").is_file()


def test_summarize_does_not_write_below_her_directory(box: Path) -> None:
    session = roots_directory(her_directory(box / "her", 0o755) / "s")
    training_session(session)
    out = gpuherd("summarize", str(session))
    assert out.returncode == 0, out.stderr  # the summary is still printed
    assert out.stderr.startswith(
        f"gpuherd: could not write the summary files into {session}: "
        f"refusing to write summary.json: {box / 'her'} belongs to uid "
        f"{OTHER_UID}"
    ), out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert not (session / "summary.json").exists() and not (session / "summary.md").exists()


def test_a_hard_link_under_a_session_name_is_not_appended_to(box: Path) -> None:
    """Root makes the hard link, as she would where fs.protected_hardlinks=0.

    Here the kernel forbids her a hard link to a file of root's, so root makes it, to
    simulate such a host; the directory is root's and sticky, like `/tmp`.
    """
    run = roots_directory(box / "run", 0o1777)
    writer = SessionWriter(run, {"driver": None})
    target = secret_file(box)
    os.link(target, run / "host.csv")
    with pytest.raises(
        SessionWriteError,
        match=r"host\.csv is a file with 2 hard links, not "
        "one gpuherd created; gpuherd does not write",
    ):
        writer.write_host(HostSample(1000.0))
    writer.close()
    unchanged({target: SECRET})


def test_a_stale_lock_hard_linked_to_roots_file_is_not_taken_over(box: Path) -> None:
    """Taking a stale `.lock` over truncates it: a hard link would truncate its target.

    Root makes the hard link, as she would where fs.protected_hardlinks=0 (see above).
    """
    run = roots_directory(box / "run", 0o1777)
    target = secret_file(box)
    os.link(target, run / ".lock")
    out = gpuherd("record", str(run), "--", "true")
    unchanged({target: SECRET})
    assert out.returncode == 1, out.stderr  # as for a lock another user holds
    assert len(out.stderr.splitlines()) == 1 and "2 hard links" in out.stderr, out.stderr
    assert sorted(p.name for p in run.iterdir()) == [".lock"]


def hard_linked_example(directory: Path, owner: int) -> Path:
    example = directory / "example.yaml"
    shutil.copy(EXAMPLES / "llama_lora.yaml", example)
    os.chown(example, owner, owner)
    os.link(example, directory / "other-name.yaml")
    return example


def test_note_refuses_roots_rewrite_of_her_hard_linked_file(box: Path) -> None:
    example = hard_linked_example(her_directory(box / "ex", 0o755), OTHER_UID)
    before = example.read_bytes()
    with pytest.raises(
        NoteError, match="it has 2 hard links, and it or its directory belongs to another user"
    ):
        write_note(example, NOTE)
    assert example.read_bytes() == before


def test_note_refuses_roots_rewrite_of_another_users_hard_linked_file_in_roots_directory(
    box: Path,
) -> None:
    # Her file, linked (by her, where the kernel lets her) into a directory of root's.
    example = hard_linked_example(roots_directory(box / "ex"), OTHER_UID)
    with pytest.raises(NoteError, match="it has 2 hard links"):
        write_note(example, NOTE)


def test_note_keeps_the_hard_links_of_roots_own_example(box: Path) -> None:
    example = hard_linked_example(roots_directory(box / "ex"), 0)
    before = example.stat()
    assert write_note(example, NOTE)
    after = example.stat()
    assert (after.st_ino, after.st_nlink) == (before.st_ino, 2)
    assert "last_verification_note" in (box / "ex" / "other-name.yaml").read_text()


def test_the_supervisor_keeps_writing_where_it_started_after_the_path_is_swapped(box: Path) -> None:
    """The directory renamed away and a link to root's put in its place, mid-command.

    Where `record` records, no other user can do this (see the refusals above); root does it
    here, to pin that the log and the exit record do not follow the path meanwhile.
    """
    run = roots_directory(roots_directory(box / "parent") / "run")
    (run / "command.log").touch()
    elsewhere = box / "secret"
    go = box / "go"
    script = f"echo early; while [ ! -e {go} ]; do sleep 0.05; done; echo late"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd.proc.supervisor",
            "--no-echo",
            "--log",
            str(run / "command.log"),
            "--exit-file",
            str(run / "command.exit.json"),
            "--",
            "sh",
            "-c",
            script,
        ],
        cwd=ROOT,
    )
    while b"early" not in (run / "command.log").read_bytes():
        assert child.poll() is None, "the supervisor ended before the command wrote"
        select.select([], [], [], 0.05)
    moved = run.rename(box / "parent" / "moved")
    run.symlink_to(elsewhere)
    go.touch()
    assert child.wait(timeout=60) == 0
    assert list(elsewhere.iterdir()) == []
    assert (moved / "command.log").read_bytes() == b"early\nlate\n"
    assert json.loads((moved / "command.exit.json").read_text())["exit_code"] == 0


def test_record_writes_nothing_through_a_link_swapped_in_mid_recording(box: Path) -> None:
    """The session directory renamed away and `run -> secret` put in its place, mid-command.

    Root swaps it (no other user can, where `record` records); the exit record, `meta.json`
    and the summary go to the directory that was opened, or nowhere, never to the link's target.
    """
    run = box / "parent" / "run"
    roots_directory(box / "parent")
    go = box / "go"
    secret = box / "secret"
    target = secret_file(box, "summary.md")
    script = f"echo early; while [ ! -e {go} ]; do sleep 0.05; done; echo late"
    child = subprocess.Popen(
        [sys.executable, "-m", "gpuherd", "record", str(run), "--", "sh", "-c", script],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GPUHERD_PEAK_TRACE": "1"},
    )  # one more file
    while not (run / "command.log").exists() or b"early" not in (run / "command.log").read_bytes():
        assert child.poll() is None, child.communicate()
        select.select([], [], [], 0.05)
    moved = run.rename(box / "parent" / "moved")
    run.symlink_to(secret)
    go.touch()
    _, err = child.communicate(timeout=120)
    unchanged({target: SECRET})
    assert sorted(p.name for p in secret.iterdir()) == ["summary.md"], err
    assert json.loads((moved / "command.exit.json").read_text())["exit_code"] == 0
    assert json.loads((moved / "meta.json").read_text())["ended_at"] is not None
    assert (moved / "peak_trace.csv").is_file()


def test_an_ordinary_user_records_below_a_directory_a_colleague_owns(box: Path) -> None:
    """The path rule guards root's privilege only: her run below a colleague's group-writable
    project directory (refused to root, see above) is recorded, as her own writes reach only
    files she may write anyway."""
    python, env = python_for_everyone() or pytest.skip("no Python the other uid can start")
    project = box / "project"
    project.mkdir()
    os.chown(project, OTHER_UID + 1, OTHER_UID)  # a colleague's, her group may write
    project.chmod(0o775)
    run = project / "run"
    done = subprocess.run(
        as_other_user([python, "-m", "gpuherd", "record", str(run), "--", "true"]),
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert (run / "meta.json").stat().st_uid == OTHER_UID
    assert gpuherd("record", str(project / "roots-run"), "--", "true").returncode == 2

"""Root writing into directories another user can write to, as the attack ran it.

A second real user (`OTHER_UID`, through `setpriv`) makes the directory and plants links named
like the files gpuherd writes, pointing at files only root may write; root then runs the real
code (`gpuherd record`, `SessionWriter`, `gpuherd summarize`, `write_note`). Every test checks
that the link targets are as they were and that the command refused or went around them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.samples import HostSample
from gpuherd.note.note_file import BACKUP_SUFFIX, write_note
from gpuherd.session.session import SessionWriteError, SessionWriter
from tests.privileges import OTHER_UID, as_other_user, shared_directory
from tests.unit.test_note import EXAMPLES, NOTE, training_session

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attack is another user against root (CI runs as root)"
)

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
SECRET = b"root:only\n"
RECORD_NAMES = (
    ".lock",
    "gpu.csv",
    "metrics.csv",
    "events.jsonl",
    "command.log",
    "peak_trace.csv",
    ".command.exit.json.tmp",
    "meta.json",
    "host.csv",
    "processes.csv",
)
"""The names the attack planted; `.lock` first, so that its link leads to an existing file."""


@pytest.fixture
def box() -> Iterator[Path]:
    """A shared directory holding `secret/`: root's files, which no link may get written."""
    with shared_directory() as where:
        (where / "secret").mkdir(mode=0o700)
        yield where


def as_her(script: str) -> None:
    """Run `script` (sh) as the other user; it must succeed."""
    done = subprocess.run(as_other_user(["sh", "-ec", script]), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def her_directory(path: Path, mode: int) -> Path:
    """A directory of hers, with `mode`, as she would have made it with `mkdir`."""
    path.mkdir()
    os.chown(path, OTHER_UID, OTHER_UID)
    path.chmod(mode)
    return path


def plant(directory: Path, names: tuple[str, ...], secret: Path) -> dict[Path, bytes | None]:
    """Links `names` in `directory` (made by her) to root's files; what each target holds now.

    Half the targets exist (root's file, to be overwritten), half do not (to be created).
    """
    targets: dict[Path, bytes | None] = {}
    links = []
    for n, name in enumerate(names):
        target = secret / f"target-{n}"
        if n % 2 == 0:
            target.write_bytes(SECRET)
            target.chmod(0o600)
        targets[target] = target.read_bytes() if target.exists() else None
        links.append(f"ln -s {target} {directory / name}")
    as_her("; ".join(links))
    return targets


def unchanged(targets: dict[Path, bytes | None]) -> None:
    for target, before in targets.items():
        now = target.read_bytes() if target.exists() else None
        assert now == before, f"{target} was written through a planted link"
        if before is not None:
            info = target.stat()
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)


def gpuherd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "gpuherd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        (0o777, "is writable by every user (mode 0777) without the sticky bit"),
        (0o1777, f"belongs to uid {OTHER_UID}, and root writes there only by privilege"),
    ],
)
def test_record_refuses_her_directory_full_of_links(box: Path, mode: int, why: str) -> None:
    run = her_directory(box / "run", mode)
    targets = plant(run, RECORD_NAMES, box / "secret")
    out = gpuherd("record", str(run), "--", "true")
    unchanged(targets)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1 and why in out.stderr, out.stderr
    assert sorted(p.name for p in run.iterdir()) == sorted(RECORD_NAMES)  # nothing added


def test_record_refuses_a_link_planted_in_a_sticky_directory_like_tmp(box: Path) -> None:
    tmp = box / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # root's, as /tmp is: others may add names, not touch root's files
    run = tmp / "run"
    run.mkdir()
    run.chmod(0o1777)
    targets = plant(run, (".lock", "metrics.csv"), box / "secret")
    out = gpuherd("record", str(run), "--", "true")
    unchanged(targets)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"gpuherd: refusing to record: {run / 'metrics.csv'} is a symbolic "
        "link where gpuherd writes its metrics.csv; remove it, or record into "
        "a new directory you own\n"
    )


def test_record_in_a_sticky_directory_goes_around_a_planted_temporary_name(box: Path) -> None:
    # `.command.exit.json.tmp` was a fixed name: root replaced its target with the exit record.
    run = box / "run"
    run.mkdir()
    run.chmod(0o1777)
    targets = plant(run, (".command.exit.json.tmp", ".meta.json.tmp"), box / "secret")
    out = gpuherd("record", str(run), "--", "true")
    unchanged(targets)
    assert out.returncode == 0, out.stderr
    for name in ("command.exit.json", "meta.json", "gpu.csv", "command.log", "summary.md"):
        info = (run / name).lstat()
        assert stat.S_ISREG(info.st_mode) and info.st_uid == 0, name


def test_links_planted_while_recording_are_not_written_through(box: Path) -> None:
    # In a sticky directory she may add names at any time: after the checks, before the
    # writer first creates a file it opens lazily.
    run = box / "run"
    run.mkdir()
    run.chmod(0o1777)
    writer = SessionWriter(run, {"driver": None})
    targets = plant(run, ("host.csv", "events.jsonl", "metrics.csv"), box / "secret")
    with pytest.raises(
        SessionWriteError,
        match=r"host\.csv is a symbolic link; gpuherd does "
        "not write through it",
    ):
        writer.write_host(HostSample(1000.0))
    writer.close()
    unchanged(targets)
    assert not (run / ".lock").exists()


def test_a_file_she_made_first_under_a_session_name_is_not_written_to(box: Path) -> None:
    # Not a link, her own regular file: root's rows would be hers to read and change.
    run = box / "run"
    run.mkdir()
    run.chmod(0o1777)
    writer = SessionWriter(run, {"driver": None})
    as_her(f"printf 'hers\\n' > {run / 'metrics.csv'}")
    with pytest.raises(
        SessionWriteError,
        match=rf"metrics\.csv is a file of uid {OTHER_UID}, "
        "not of this user; gpuherd does not write to it",
    ):
        writer.append_rows("metrics.csv", ("t", "value"), [(1.0, 2.0)])
    writer.close()
    assert (run / "metrics.csv").read_text() == "hers\n"


def test_record_as_root_under_sudo_into_the_callers_own_directory(box: Path) -> None:
    run = her_directory(box / "run", 0o755)
    out = gpuherd("record", str(run), "--", "true", env={"SUDO_UID": str(OTHER_UID)})
    assert out.returncode == 0, out.stderr
    assert (run / "meta.json").stat().st_uid == 0


def test_summarize_goes_around_links_sprayed_for_the_next_pids(box: Path) -> None:
    session = her_directory(box / "s", 0o777)
    training_session(session)
    target = box / "secret" / "target"
    target.write_bytes(SECRET)
    target.chmod(0o600)
    # One process of hers makes every link (one `ln` each would use up the pids she aims at),
    # for the next 2,000 pids: other processes of the host take some meanwhile.
    spray = (
        f"import os; os.chdir({str(session)!r}); last = int(open("
        "'/proc/sys/kernel/ns_last_pid').read())\n"
        "for pid in range(last, last + 2000):\n"
        "    for kind in ('json', 'md'):\n"
        f"        os.symlink({str(target)!r}, f'.summary.{{kind}}.{{pid}}.tmp')"
    )
    done = subprocess.run(
        as_other_user([_system_python(), "-c", spray]), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    out = gpuherd("summarize", str(session))
    unchanged({target: SECRET})
    assert out.returncode == 0, out.stderr
    assert stat.S_ISREG((session / "summary.md").lstat().st_mode)


def _system_python() -> str:
    """A Python every user may run (the test's own may live under a directory only root enters)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no system python3 for the other user")


def test_note_chown_cannot_be_redirected_by_swapping_the_backup(
    box: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # She owns the example and its directory, so she may replace root's backup with a link
    # at any moment; here, at the worst one: after it is written, before it is chowned.
    ours = her_directory(box / "ex", 0o755)
    example = ours / "example.yaml"
    shutil.copy(EXAMPLES / "llama_lora.yaml", example)
    os.chown(example, OTHER_UID, OTHER_UID)
    target = box / "secret" / "shadow"
    target.write_bytes(SECRET)
    target.chmod(0o600)
    backup = ours / f"example.yaml{BACKUP_SUFFIX}"
    real_fsync = os.fsync
    swapped = []

    def fsync_then_swap(fd: int) -> None:
        real_fsync(fd)
        if not swapped and backup.exists() and not backup.is_symlink():
            as_her(f"rm -f {backup}; ln -s {target} {backup}")
            swapped.append(True)

    monkeypatch.setattr(os, "fsync", fsync_then_swap)
    write_note(example, NOTE)
    monkeypatch.undo()
    assert swapped, "the seam was never reached"
    unchanged({target: SECRET})
    assert example.stat().st_uid == OTHER_UID
    assert "last_verification_note" in example.read_text()

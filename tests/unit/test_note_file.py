"""`gpuherd note` on the example file itself: in place, read-only files, crashes, YAML bounds."""

from __future__ import annotations

import grp
import os
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuherd.note.note_file import BACKUP_SUFFIX
from gpuherd.note.yaml_edit import YamlEditError, set_block
from tests.unit.test_note import EXAMPLES, NOTE, training_session

REPO = Path(__file__).resolve().parents[2]
BILLION_LAUGHS = (
    "\n".join(
        [
            "# each list holds nine of the previous one",
            'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        ]
        + [
            f"{b}: &{b} [{', '.join(['*' + a] * 9)}]"
            for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        ]
        + ["verification: {}"]
    )
    + "\n"
)
"""9 lists of 9 aliases: 474 bytes that expand to 9**9 (387 million) strings."""


CRASHABLE = (
    "import signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); "
    "from gpuherd.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""The command line with SIGXFSZ as a C program has it (Python ignores it): a write past the
file size limit then kills the process, in the middle of writing."""


def note_cli(
    session: Path, example: Path, crashable: bool = False, **kwargs
) -> subprocess.CompletedProcess[str]:
    start = ["-c", CRASHABLE] if crashable else ["-m", "gpuherd"]
    return subprocess.run(
        [sys.executable, *start, "note", str(session), "--example", str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    session = training_session(tmp_path / "s")
    example = tmp_path / "ex" / "example.yaml"
    example.parent.mkdir()
    shutil.copy(EXAMPLES / "llama_lora.yaml", example)
    return session, example


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_owner_group_and_mode_survive_the_note(setup) -> None:
    # Hard links survive too where root may keep them: see test_files_swapped_paths.py.
    session, example = setup
    nobody, nogroup = pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    os.chown(example, nobody, nogroup)
    os.chmod(example, 0o640)
    before = example.stat()
    out = note_cli(session, example)
    assert out.returncode == 0, out.stderr
    after = example.stat()
    assert (after.st_uid, after.st_gid) == (nobody, nogroup)
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert after.st_ino == before.st_ino
    assert 'last_verification_note: "Verified training run' in example.read_text()
    assert sorted(p.name for p in example.parent.iterdir()) == ["example.yaml"]


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555])
def test_a_read_only_file_is_refused_and_left_as_it_is(setup, mode: int) -> None:
    session, example = setup
    before = example.read_bytes()
    os.chmod(example, mode)
    out = note_cli(session, example)
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd: {example}: read-only (mode {mode:04o}); make it writable (chmod u+w) "
        "to let gpuherd write the note\n",
    )
    assert example.read_bytes() == before and stat.S_IMODE(example.stat().st_mode) == mode
    os.chmod(example, mode | 0o200)  # one write bit is enough
    assert note_cli(session, example).returncode == 0


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the kill

    return apply


def test_a_crash_mid_write_leaves_the_old_content_beside_it_and_the_next_run_stops(setup) -> None:
    session, example = setup
    before = example.read_bytes()
    # Writes past this size kill the process (SIGXFSZ): the backup (the old size) is written,
    # the new, longer text is cut off part way, as a crash or kill -9 in the middle would.
    out = note_cli(session, example, crashable=True, preexec_fn=_limit_file_size(len(before) + 20))
    assert out.returncode == -signal.SIGXFSZ
    backup = example.with_name("example.yaml" + BACKUP_SUFFIX)
    assert backup.read_bytes() == before
    half = example.read_bytes()
    assert half != before and len(half) == len(before) + 20
    again = note_cli(session, example)
    assert again.returncode == 2
    assert again.stderr == (
        f"gpuherd: {backup} exists: an earlier `gpuherd note` stopped while "
        f"rewriting {example}, and this is the file as it was before. "
        "Compare the two, keep the right one, delete the backup, then run "
        "again\n"
    )
    assert example.read_bytes() == half and backup.read_bytes() == before
    backup.unlink()
    example.write_bytes(before)
    assert note_cli(session, example).returncode == 0


def test_a_failed_write_puts_the_old_content_back_and_exits_1(setup) -> None:
    session, example = setup
    before = example.read_bytes()
    out = note_cli(session, example, preexec_fn=_limit_file_size(len(before) + 20))
    assert out.returncode == 1
    assert out.stderr == (
        f"gpuherd: {example}: cannot write: File too large; the file is as it was\n"
    )
    assert example.read_bytes() == before
    assert sorted(p.name for p in example.parent.iterdir()) == ["example.yaml"]


def test_billion_laughs_is_refused_before_anything_expands_it(setup) -> None:
    session, example = setup
    assert len(BILLION_LAUGHS.encode()) == 474
    with pytest.raises(YamlEditError, match="its aliases expand to more than 100,000 nodes"):
        set_block(BILLION_LAUGHS, "verification", NOTE.values())
    example.write_text(BILLION_LAUGHS)
    out = note_cli(session, example)
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd: {example}: its aliases expand to more than 100,000 nodes; gpuherd does "
        "not edit such files\n",
    )
    assert example.read_text() == BILLION_LAUGHS


def test_aliases_below_the_bound_are_edited() -> None:
    text = "\n".join(BILLION_LAUGHS.splitlines()[:5]) + "\n"  # 9**5 = 59,049 strings
    new = set_block(text, "verification", NOTE.values())
    assert new.startswith(text) and "last_verified: 2025-10-25" in new


def test_a_file_over_1_mib_is_refused_unread(setup) -> None:
    session, example = setup
    big = "verification: {}\nx: '" + "y" * (10 << 20) + "'\n"
    example.write_text(big)
    out = note_cli(session, example)
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd: {example}: larger than 1 MiB; gpuherd note edits example files up to "
        "that size\n",
    )
    with pytest.raises(YamlEditError, match="characters; gpuherd edits YAML files of up to "):
        set_block(big, "verification", NOTE.values())


def test_deep_nesting_and_bad_yaml_are_one_line_with_the_place(setup) -> None:
    session, example = setup
    with pytest.raises(YamlEditError, match="nested deeper than 100 levels"):
        set_block("a: " + "[" * 5000 + "]" * 5000 + "\n", "verification", NOTE.values())
    example.write_text("a: 1\nb: [1, 2\nc: 3\n")
    out = note_cli(session, example)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(f"gpuherd: {example}: not valid YAML: ")
    assert "(line 3, column 2)" in out.stderr


def test_a_session_without_meta_json_is_one_line_and_exit_2(setup) -> None:
    session, example = setup
    (session / "meta.json").unlink()
    before = example.read_bytes()
    out = note_cli(session, example)
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd: {session}: not a gpuherd session (no meta.json in it)\n",
    )
    assert example.read_bytes() == before


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab:-&*[]{}!|>'\"#\n ,?%@`\t.1", max_size=80))
def test_any_text_is_edited_or_refused_with_a_yaml_edit_error(text: str) -> None:
    try:
        new = set_block(text, "verification", NOTE.values())
    except YamlEditError as error:
        assert "\n" not in error.msg
    else:
        assert "last_verified: 2025-10-25" in new

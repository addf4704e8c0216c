"""`write_atomic`, which writes `summary.json` and `summary.md`: bytes, encoding, mode, errors.

Cases found by mutation testing (benchmarks/mutation.py): the file's encoding under a C
locale, the permission bits it is asked for, and a directory it may not write to.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import gpuherd.summary.summary as summary_module
from gpuherd.summary.summary import write_atomic

ROOT = Path(summary_module.__file__).resolve().parents[2]
TEXT = "# GPU 0: NVIDIA H200 — 30.0 GiB, loss 0.5 → 0.2\r\nnext line\n"


def test_the_text_goes_through_a_hidden_temporary_file_of_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.md"
    target.write_text("previous\n")
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: str, dst: str, **dir_fds: int) -> None:
        renames.append((str(src), str(dst)))
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(os, "replace", replace)
    write_atomic(target, TEXT)
    write_atomic(target, TEXT)
    # relative to the directory, and a name nobody can guess (a pid is easy to guess)
    assert [dst for _, dst in renames] == ["summary.md", "summary.md"]
    assert all(re.fullmatch(r"\.summary\.md\.[0-9a-f]{16}\.tmp", src) for src, _ in renames)
    assert renames[0][0] != renames[1][0]
    # UTF-8, and the line ends exactly as given (no newline translation)
    assert target.read_bytes() == TEXT.encode("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_the_file_is_utf8_under_a_c_locale(tmp_path: Path) -> None:
    # cron and minimal containers run with LANG=C, whose locale encoding is ASCII
    here = tmp_path / "here.md"
    write_atomic(here, TEXT)
    there = tmp_path / "there.md"
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    code = (
        "import sys; from pathlib import Path; "
        "from gpuherd.summary.summary import write_atomic; "
        f"write_atomic(Path(sys.argv[1]), {ascii(TEXT)})"
    )  # the code itself is ASCII
    out = subprocess.run(
        [sys.executable, "-c", code, str(there)], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert there.read_bytes() == here.read_bytes() == TEXT.encode("utf-8")


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_the_new_file_gets_the_mode_asked_for(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "summary.json"
    write_atomic(target, "{}\n", mode=mode)
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text() == "{}\n"


def test_a_directory_we_may_not_write_is_said_as_such(tmp_path: Path) -> None:
    # The temporary file was never made: its clean-up must not turn "Permission denied" into
    # "No such file or directory". Root may write anywhere, so a forked child drops to nobody.
    write_atomic(tmp_path / "summary.json", "{}\n")  # the parent's own call
    shared = Path(tempfile.mkdtemp(prefix="gpuherd-ro-"))
    try:
        shared.chmod(0o755)
        session = shared / "session"
        session.mkdir(mode=0o555)
        session.chmod(0o555)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report the error's type through the pipe, never return
            name = "none"
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                write_atomic(session / "summary.json", "{}\n")
            except BaseException as e:  # noqa: BLE001 - its name is the answer
                name = type(e).__name__
            finally:
                os.write(write, name.encode())
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as f:
            assert f.read().decode() == "PermissionError"
        assert list(session.iterdir()) == []
    finally:
        shutil.rmtree(shared, ignore_errors=True)

"""`gpuherd parse` as a shell user meets it: pipes, empty and binary files, forced formats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _parse(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _log(path: Path, lines: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"step={i} loss={2 + 1 / (i + 1):.4f}\n" for i in range(lines)))
    return path


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_closed_pipe_ends_quietly_with_141(tmp_path: Path, json_flag: list[str]) -> None:
    # 20 000 lines are far more than a pipe buffer holds, so the writer meets the closed pipe
    log = _log(tmp_path / "train.log", 20_000)
    writer = subprocess.Popen(
        [sys.executable, "-m", "gpuherd", "parse", *json_flag, str(log)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, timeout=120)
    writer.stdout.close()  # only `head` holds the read end now
    stderr = writer.stderr.read()
    assert writer.wait(timeout=120) == 141
    assert stderr == b""
    assert len(head.stdout.splitlines()) == 1
    # through a real shell pipeline too, as in the report
    shell = subprocess.run(
        f'{sys.executable} -m gpuherd parse {log} | head -1; echo "status=${{PIPESTATUS[0]}}"',
        shell=True,
        executable="bash",
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.stdout.splitlines()[-1] == "status=141"
    assert shell.stderr == ""


def test_an_empty_and_a_binary_file_are_said_with_status_1(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 40 + b"\x00\x01\n\x7fELF\x02\x01\n")
    good = _log(tmp_path / "good.log", 3)
    done = _parse("--json", str(empty), str(binary), str(good))
    assert done.returncode == 1
    assert done.stderr == (
        f"gpuherd parse: {empty}: empty\ngpuherd parse: {binary}: no text lines (binary?)\n"
    )
    assert len(done.stdout.splitlines()) == 3  # the good file is still parsed
    alone = _parse(str(good))
    assert alone.returncode == 0 and alone.stderr == ""


def test_a_log_with_nul_blocks_after_a_crash_still_parses(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"step=1 loss=0.5\n" + b"\x00" * 4096 + b"\nstep=2 loss=0.25\n")
    done = _parse("--json", str(log))
    assert done.returncode == 0 and done.stderr == ""
    assert len(done.stdout.splitlines()) == 2


def test_a_forced_format_that_matches_no_line_is_said(tmp_path: Path) -> None:
    log = _log(tmp_path / "train.log", 50)
    # detectron2 reads its own lines only (a console format would also read `step=1 loss=2`)
    done = _parse("--format", "detectron2", str(log))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"gpuherd parse: {log}: no line matched --format detectron2; without "
        "--format it reads as generic\n"
    )
    right = _parse("--format", "generic", str(log))
    assert right.returncode == 0 and right.stderr == "" and len(right.stdout.splitlines()) > 50


def test_the_table_shows_the_format_and_keeps_its_columns_for_long_paths(tmp_path: Path) -> None:
    short = _log(tmp_path / "s" / "a.log", 2)
    deep = tmp_path / "a-rather-long-directory-name" / "and-another-one-below-it"
    long = _log(deep / "train.log", 2)
    assert len(str(long.relative_to(tmp_path))) > 44
    done = _parse("s/a.log", str(long.relative_to(tmp_path)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["FILE:LINE", "FORMAT", "STEP", "EPOCH", "METRIC", "VALUE"]
    assert len(rows) == 4
    assert [row.split()[1] for row in rows] == ["generic"] * 4
    # every column starts where its header does, for the short path and the long one
    for title in ("FORMAT", "METRIC"):
        column = header.index(title)
        assert {row[column - 1] for row in rows} == {" "}
        assert all(row[column] != " " for row in rows)
    # 40 characters: the path's first 12 and last 25, the line number kept whole
    assert rows[2].split()[0] == "a-rather-lon…er-one-below-it/train.log:1"
    assert len(rows[2].split()[0]) == 40
    assert str(short.name) in rows[0]

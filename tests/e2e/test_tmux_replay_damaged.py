"""`gpuherd --replay` of a damaged session in a real tmux pane: notes and N/A, never a crash."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane

SESSION = REPO / "tests" / "data" / "sessions" / "e2e"

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def damaged(tmp_path: Path) -> Path:
    """The e2e session with a GPU -5 % busy, memory of -1 bytes, and unplaceable rows."""
    session = Path(shutil.copytree(SESSION, tmp_path / "s"))
    lines = (session / "gpu.csv").read_text().splitlines()
    header = lines[0].split(",")

    def cell(line: int, column: str, value: str) -> None:
        cells = lines[line - 1].split(",")
        cells[header.index(column)] = value
        lines[line - 1] = ",".join(cells)

    for line in range(2, len(lines) + 1, 2):  # every row of GPU 0
        cell(line, "util_gpu_pct", "-5")
        cell(line, "mem_total_bytes", "-1")
    cell(5, "gpu", "inf")
    cell(7, "t", "1e300")
    lines[8] = 'garbage "with a quote, \x01 and more'
    (session / "gpu.csv").write_text("\n".join(lines) + "\n")
    with open(session / "events.jsonl", "a") as f:
        f.write('{"t": NaN, "kind": "start"}\n')
    return session


def test_a_damaged_session_replays_with_its_notes_and_na_cells(pane: Pane, tmp_path: Path) -> None:
    session = damaged(tmp_path)
    argv = [sys.executable, "-m", "gpuherd", "--replay", str(session), "--speed", "8"]
    command = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30"
    pane.start(command, 200, 50)
    screen = pane.wait_for(lambda s: "NVIDIA H100 80GB HBM3" in s and "skipped 3 lines" in s)
    assert "gpu.csv: skipped 3 lines that could not be read (first: line 5: gpu: 'inf'" in (
        screen.replace("\n", "")
    )
    assert "bad cells read as N/A" in screen and "events.jsonl: skipped 1 line" in screen
    screen = pane.wait_for(lambda s: "replay finished" in s, timeout_s=30)
    assert "N/A" in screen  # GPU 0's utilization and total memory
    assert "Internal error" not in screen and "Traceback" not in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen

"""A closed tmux pane must not take the recorded training down with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane
from tests.recorded import loss_steps, wait_until

pytestmark = pytest.mark.tmux

TRAIN = (
    "import time\n"
    "for step in range(40):\n"
    "    print(f'step={step} loss={1.0 / (step + 1):.4f}', flush=True)\n"
    "    time.sleep(0.1)\n"
    "raise SystemExit(3)\n"
)


def test_closing_the_pane_leaves_the_command_running_and_the_session_closed(
    pane: Pane, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    pane.start(
        f"cd {REPO} && {sys.executable} -m gpuherd --record {root} --peak-interval 0 "
        f"-- {sys.executable} {script}",
        100,
        20,
    )
    log = root / "command.log"
    wait_until(lambda: log.exists() and "step=5 " in log.read_text(), timeout_s=30.0)
    pane.tmux("kill-server")  # SIGHUP to everything in the pane, as closing the window does
    # The command outlives the pane and ends by itself with its own exit status.
    wait_until(lambda: (root / "command.exit.json").exists(), timeout_s=30.0)
    assert json.loads((root / "command.exit.json").read_text())["exit_code"] == 3
    lines = log.read_text().splitlines()
    assert lines == [f"step={i} loss={1.0 / (i + 1):.4f}" for i in range(40)]
    # gpuherd saw the hang-up, kept recording, and closed the session with the exit status.
    wait_until(
        lambda: json.loads((root / "meta.json").read_text()).get("ended_at") is not None,
        timeout_s=30.0,
    )
    meta = json.loads((root / "meta.json").read_text())
    assert meta["exit_code"] == 3
    events = [json.loads(e) for e in (root / "events.jsonl").read_text().splitlines()]
    hangups = [e for e in events if e["kind"] == "signal"]
    assert [(e["signal"], e["forwarded"]) for e in hangups] == [("SIGHUP", None)]
    assert sorted(set(loss_steps(root))) == list(range(40))

"""`gpuherd --replay` in a real tmux pane: keys in, `capture-pane` text out."""

from __future__ import annotations

import shlex
import shutil
import sys

import pytest

from tests.e2e.tmux_pane import REPO, Pane

SESSION = REPO / "tests" / "data" / "sessions" / "e2e"

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def start_replay(pane: Pane, *extra: str, width: int = 160, height: int = 50) -> None:
    argv = [sys.executable, "-m", "gpuherd", "--replay", str(SESSION), *extra]
    # The shell prints the exit status after gpuherd returns, then keeps the pane open to read.
    command = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30"
    pane.start(command, width, height)


def test_replay_shows_the_session_and_answers_keys(pane: Pane) -> None:
    start_replay(pane, "--speed", "2")
    screen = pane.wait_for(lambda s: "NVIDIA H100 80GB HBM3" in s and "carol" in s)
    assert "NVIDIA A100-SXM4-40GB" in screen
    assert "REPLAY" in screen and "e2e-box" in screen and "x2" in screen
    assert "/ 79.6 GiB" in screen and "3.5 / 40.0 GiB" in screen  # VRAM of both GPUs
    assert "55 / 400 W" in screen and "34°C" in screen  # GPU 1 is constant in the fixture
    assert "31337" in screen and "python train_e2e.py --epochs 3" in screen
    assert "4711" in screen and "torchrun ddp_job.py" in screen and "2:00:" in screen
    assert "200.0 / 1024.0 GiB" in screen  # host RAM

    pane.keys("?")
    pane.wait_for(lambda s: "gpuherd keys" in s and "cycle the process sort" in s)
    pane.keys("Escape")
    pane.wait_for(lambda s: "gpuherd keys" not in s)

    pane.keys("s")
    pane.wait_for(lambda s: "sort: CPU %" in s)

    pane.keys("/", "d", "a", "v", "e")
    screen = pane.wait_for(lambda s: "filter: 'dave'" in s)
    assert "torchrun ddp_job.py" in screen and "train_e2e.py" not in screen
    pane.keys("Enter", "Escape")
    pane.wait_for(lambda s: "train_e2e.py" in s and "filter:" not in s)

    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen


def test_replay_runs_to_the_end_and_survives_a_small_terminal(pane: Pane) -> None:
    start_replay(pane, "--speed", "8", width=80, height=24)
    pane.wait_for(lambda s: "NVIDIA H100 80GB HBM3" in s and "carol" in s)
    pane.tmux("resize-window", "-t", "e2e", "-x", "60", "-y", "20")
    screen = pane.wait_for(lambda s: "replay finished" in s or "REPLAY" in s)
    pane.wait_for(lambda s: len(s.splitlines()[0]) <= 60 and "NVIDIA H100" in s)
    pane.tmux("resize-window", "-t", "e2e", "-x", "160", "-y", "50")
    screen = pane.wait_for(lambda s: "replay finished" in s, timeout_s=20)
    assert "Traceback" not in screen
    # The last recorded row stays on screen after the end: GPU 0 drew 349 W at t0+39.
    assert "349 / 700 W" in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen


def test_a_session_recorded_without_a_gpu_replays_saying_so(pane: Pane, tmp_path) -> None:
    # recorded for real on a machine where NVML cannot be used: there is no GPU reading at all
    import subprocess

    from collectors.base import CollectorUnavailable
    from collectors.machine.nvml import NvmlCollector

    try:
        NvmlCollector().open()
    except CollectorUnavailable:
        pass
    else:
        pytest.skip("an NVIDIA driver is here: the session would hold GPU readings")
    session = tmp_path / "no-gpu"
    recorded = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "record",
            str(session),
            "--peak-interval",
            "0",
            "--",
            sys.executable,
            "-c",
            "import time\nfor s in range(1, 4):\n print(f'step={s} "
            "loss={1 / s}', flush=True); time.sleep(0.4)",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    argv = [sys.executable, "-m", "gpuherd", "replay", str(session)]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        140,
        40,
    )
    screen = pane.wait_for(lambda s: "replay finished" in s, timeout_s=30)
    assert (
        "this session holds no GPU readings (when it was recorded: NVIDIA driver not found"
        in screen
    )
    assert "waiting for the first GPU reading" not in screen and "no data yet" not in screen
    assert "gpuherd --demo" not in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen

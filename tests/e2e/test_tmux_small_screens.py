"""Small terminals in a real tmux pane: eight GPUs and the tasks at 80x24, no dead keys."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from collectors.samples import GpuProcess, GpuSample, GpuTick
from collectors.session.session_format import METRICS_COLUMNS
from gpuherd.session.session import SessionWriter
from tests.e2e.tmux_pane import REPO, Pane

GIB = 1 << 30
T0 = 1_764_130_000.0
RUN = "/home/alice/experiments/resnet50-lr3e-4/lightning_logs/version_3/metrics.csv"

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def eight_gpu_session(root: Path) -> Path:
    with SessionWriter(
        root,
        {"host": "eight", "started_at": T0, "interval_s": 1.0, "command": ["python", "train.py"]},
    ) as writer:
        for n in range(40):
            devices = tuple(
                GpuSample(
                    i,
                    f"GPU-e1ght{i:03d}",
                    "NVIDIA H100 80GB HBM3",
                    memory_used_bytes=(20 + i) * GIB,
                    memory_total_bytes=80 * GIB,
                    gpu_util_pct=90.0,
                    temperature_c=60.0 + i,
                    power_w=400.0,
                    power_limit_w=700.0,
                    sm_clock_mhz=1980,
                    processes=(GpuProcess(5000 + i, (20 + i) * GIB - GIB // 2),),
                )
                for i in range(8)
            )
            writer.write_gpu_tick(GpuTick(T0 + n, devices, "580.159.04", None, "13000"))
    rows = []
    for n in range(40):
        rows.append(f"{T0 + n},command,{n + 1},train/loss,{2 - n / 40},{10 * (n + 1)},1")
        rows.append(f"{T0 + n},command,{n + 1},val/acc,0.71,{10 * (n + 1)},1")
        rows.append(f"{T0 + n},command,{n + 1},throughput/it_s,11.8,{10 * (n + 1)},1")
        rows.append(f"{T0 + n + 0.5},{RUN},{n + 1},train/loss,{1.5 - n / 80},{5 * n},")
    (root / "metrics.csv").write_text(",".join(METRICS_COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return root


def start(pane: Pane, width: int, height: int, *args: str) -> None:
    argv = ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "gpuherd", *args]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        width,
        height,
    )


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40), (160, 50)])
def test_eight_gpus_and_the_tasks_stay_in_view(
    pane: Pane, tmp_path: Path, width: int, height: int
) -> None:
    start(pane, width, height, "replay", str(eight_gpu_session(tmp_path / "s")), "--speed", "4")
    screen = pane.wait_for(lambda s: "Tasks (2)" in s and "step 2" in s, timeout_s=30)
    lines = screen.splitlines()
    assert len(lines) <= height
    gpu_rows = [line for line in lines if re.match(r"│ [▶ ] +\d+ .*H100 80GB HBM3", line)]
    assert len(gpu_rows) == 8  # every GPU: one line each where two do not fit
    head = next(line for line in lines if "TASK" in line and "STATUS" in line)
    assert all(name in head for name in ("PROGRESS", "VAL", "SPEED"))
    command = next(line for line in lines if "command" in line and "running" in line)
    assert "acc 0.71" in command and "11.8 it/s" in command
    if width >= 160:
        assert RUN in screen  # the task column grows to the whole path
    pane.keys("q")
    assert "GPUHERD_EXIT=0" in pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)


def test_without_a_gpu_the_footer_offers_only_keys_that_work(pane: Pane) -> None:
    start(pane, 80, 24)  # this machine has no NVIDIA driver: the host panel alone
    screen = pane.wait_for(lambda s: "NVIDIA driver not found" in s and "CPU" in s and "Quit" in s)
    if "GPUs" in screen:
        pytest.skip("this machine has an NVIDIA GPU")
    footer = screen.rstrip().splitlines()[-1]
    assert "Quit" in footer and "Help" in footer
    assert "Filter" not in footer and "Sort" not in footer and "Next GPU" not in footer
    pane.keys("/", "a", "b")
    screen = pane.text()
    assert "filter by user" not in screen and "ab" not in screen.splitlines()[-2]
    pane.keys("q")
    assert "GPUHERD_EXIT=0" in pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)

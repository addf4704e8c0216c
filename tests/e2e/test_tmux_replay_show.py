"""A replay in a real tmux pane: tasks at their recorded time, `CUDA 13.0`, a whole last row."""

from __future__ import annotations

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

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def session(root: Path) -> Path:
    """12 s of one H200, a log whose first metric came 8 s in, the recorder's closing row."""
    with SessionWriter(root, {"host": "show-box", "started_at": T0, "interval_s": 1.0}) as w:
        for n in range(12):
            used = int((40 + n) * GIB)
            gpu = GpuSample(
                0,
                "GPU-5h0w0000",
                "NVIDIA H200",
                memory_used_bytes=used,
                memory_total_bytes=140 * GIB,
                gpu_util_pct=97.0,
                mem_util_pct=40.0,
                temperature_c=61.0,
                power_w=512.0,
                power_limit_w=700.0,
                sm_clock_mhz=1980,
                processes=(GpuProcess(4242, used - GIB),),
            )
            w.write_gpu_tick(GpuTick(T0 + n, (gpu,), "580.159.04", "13.580.159.04", "13000"))
        closing = GpuSample(
            0,
            "GPU-5h0w0000",
            "NVIDIA H200",
            memory_used_bytes=52 * GIB,
            memory_total_bytes=140 * GIB,
        )
        w.write_gpu_tick(GpuTick(T0 + 11.5, (closing,), "580.159.04"), {"GPU-5h0w0000": 52 * GIB})
    rows = [
        f"{T0 + 8 + n},/runs/show/train.log,{n + 1},train/loss,{2 - n / 10},{59 + n},"
        for n in range(3)
    ]
    (root / "metrics.csv").write_text(",".join(METRICS_COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return root


@pytest.mark.parametrize(("width", "height"), [(160, 50), (120, 40), (80, 24)])
def test_replay_shows_each_thing_at_its_time_and_ends_on_a_whole_row(
    pane: Pane, tmp_path: Path, width: int, height: int
) -> None:
    root = session(tmp_path / "s")
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        sys.executable,
        "-m",
        "gpuherd",
        "replay",
        str(root),
        "--speed",
        "2",
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        width,
        height,
    )
    first = pane.wait_for(lambda s: "NVIDIA H200" in s and "61°C" in s)
    # the log's first metric was recorded 8 s in: not on the first picture
    assert "train.log" not in first and "step 59" not in first
    if width >= 160:  # narrower, the header keeps the replay's path and the clock
        assert "CUDA 13.0" in first and "13000" not in first
    pane.wait_for(lambda s: "step 6" in s and "train.log" in s, timeout_s=20)
    last = pane.wait_for(lambda s: "replay finished" in s and "52.0 / 140.0 GiB" in s, timeout_s=20)
    assert "61°C" in last and "512 / 700 W" in last and "97%" in last
    assert "would not list" not in last and "N/A" not in last.split("Processes")[0]
    pane.keys("q")
    assert "GPUHERD_EXIT=0" in pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)

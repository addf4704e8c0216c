"""A replayed session's containers in a real tmux pane: every column fits, no scrollbar strays,
and the GPU's process stays in view beside them."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from collectors.samples import (
    ContainerSample,
    ContainerTick,
    GpuProcess,
    GpuSample,
    GpuTick,
    HostSample,
    ProcessInfo,
)
from gpuherd.session.session import SessionWriter
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

GIB = 1 << 30
T0 = 1_795_000_000.0
SIDEWAYS = "▉▊▋▌▍▎▏"
"""The glyphs that end a horizontal scrollbar's thumb: Textual draws the thumb in colour and
its fractional ends as these, so on a captured screen they are all that shows of it."""


def session(root: Path, containers: int) -> Path:
    """A minute of one GPU, its process in a container, and `containers` containers."""
    ids = [f"c{k:02x}" * 21 + "c" for k in range(containers)]
    with SessionWriter(root, {"host": "box", "started_at": T0, "interval_s": 1.0}) as writer:
        for n in range(60):
            t = T0 + n
            writer.write_gpu_tick(
                GpuTick(
                    t,
                    (
                        GpuSample(
                            0,
                            "GPU-0",
                            "NVIDIA H100 80GB HBM3",
                            memory_used_bytes=12 * GIB,
                            memory_total_bytes=80 * GIB,
                            gpu_util_pct=50.0,
                            processes=(GpuProcess(4242, 10 * GIB),),
                        ),
                    ),
                )
            )
            writer.write_host(
                HostSample(
                    t,
                    processes=(
                        ProcessInfo(
                            4242, user="ana", command="python train.py", container=ids[0][:12]
                        ),
                    ),
                )
            )
            writer.write_containers(
                ContainerTick(
                    t + 0.5,
                    tuple(
                        ContainerSample(
                            cid,
                            cid[:12],
                            f"ctr-{k}",
                            "busybox:1",
                            "running",
                            cpu_pct=3.0 + k,
                            memory_used_bytes=GIB,
                            memory_limit_bytes=8 * GIB,
                            pids=2,
                            gpu_devices=("0",) if k == 0 else (),
                        )
                        for k, cid in enumerate(ids)
                    ),
                )
            )
    return root


def panel_lines(screen: str) -> list[str]:
    """The containers panel's lines, its borders included (on a short screen the footer may
    cover its bottom border)."""
    lines = screen.splitlines()
    top = next(i for i, line in enumerate(lines) if "Containers (" in line)
    bottom = next(
        (i for i in range(top + 1, len(lines)) if lines[i].startswith("╰")), len(lines) - 1
    )
    return lines[top : bottom + 1]


@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 30), (120, 40), (160, 50)])
def test_the_containers_panel_fits_its_columns_and_draws_no_sideways_scrollbar(
    pane: Pane, tmp_path: Path, width: int, height: int
) -> None:
    root = session(tmp_path / "s", 20)
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
        "1",
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        width,
        height,
    )
    # the container that holds the GPU process, with its GPU memory (once the host's sample
    # has named the process's container), and the process itself: the containers panel takes
    # neither all the lines nor none of them
    screen = pane.wait_for(
        lambda s: (
            "Containers (20)" in s
            and any("ctr-0 " in line and "10.0 GiB" in line for line in s.splitlines())
            and any("4242" in line and "python train.py" in line for line in s.splitlines())
        ),
        timeout_s=30,
    )
    lines = panel_lines(screen)
    header = lines[1]
    assert "─ Processes " in screen, screen
    # the last column is on screen whole: the table is no wider than its panel
    assert "NAME" in header and "GPUS" in header and "GPU MEM" in header, "\n".join(lines)
    stray = [line for line in lines if any(glyph in line for glyph in SIDEWAYS)]
    assert not stray, "\n".join(lines)
    pane.keys("q")
    pane.wait_for(lambda s: "GPUHERD_EXIT=0" in s)

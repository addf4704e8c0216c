"""`gpuherd` live on a real NVIDIA GPU, in a real tmux pane (skipped without a driver or tmux)."""

from __future__ import annotations

import getpass
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from collectors.base import CollectorUnavailable
from collectors.machine.nvml import NvmlCollector
from collectors.samples import GpuTick
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

HOLD_GPU = """
import sys, time
import torch
block = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB
print("READY", flush=True)
time.sleep(float(sys.argv[1]))
"""


@pytest.fixture
def tick() -> GpuTick:
    collector = NvmlCollector()
    try:
        collector.open()
    except CollectorUnavailable as error:
        pytest.skip(f"no NVIDIA driver here: {error}")
    try:
        return collector.sample()
    finally:
        collector.close()


@pytest.fixture
def gpu_job() -> Iterator[int]:
    """A child process holding 1 GiB on GPU 0, so the process table has a row to show."""
    pytest.importorskip("torch")
    job = subprocess.Popen(
        [sys.executable, "-c", HOLD_GPU, "120"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert job.stdout is not None
        if job.stdout.readline().strip() != "READY":
            pytest.skip("torch could not allocate on the GPU")
        yield job.pid
    finally:
        job.terminate()
        job.wait(timeout=30)


def test_live_dashboard_shows_every_gpu_and_our_process(
    pane: Pane, tick: GpuTick, gpu_job: int
) -> None:
    argv = [sys.executable, "-m", "gpuherd", "--interval", "0.5"]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        160,
        50,
    )
    names = {gpu.name for gpu in tick.devices}
    user = getpass.getuser()[:10]
    # The job's row with its user: the host collector joined the details of the GPU's pid.
    screen = pane.wait_for(
        lambda s: (
            all(name in s for name in names)
            and any(str(gpu_job) in line and user in line for line in s.splitlines())
        )
    )
    assert tick.driver_version is not None and tick.driver_version in screen
    assert "NVIDIA driver not found" not in screen and "Traceback" not in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen

"""`gpuherd --tui --record` on a real NVIDIA GPU: the command's task shows the GPU it runs on."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from collectors.base import CollectorUnavailable
from collectors.machine.nvml import NvmlCollector
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

# A small real training loop on GPU 0 that logs in the generic `key=value` form.
TRAIN = """
import torch
torch.manual_seed(0)
x = torch.randn(4096, 512, device="cuda")
y = (x[:, :8].sum(1) > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 2)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 401):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0:
        torch.cuda.synchronize()
        print(f"step={step} loss={loss.item():.4f}", flush=True)
    if step % 100 == 0:
        acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"step={step} val_acc={acc:.4f}", flush=True)
    import time; time.sleep(0.02)
"""


@pytest.fixture
def driver() -> None:
    collector = NvmlCollector()
    try:
        collector.open()
    except CollectorUnavailable as error:
        pytest.skip(f"no NVIDIA driver here: {error}")
    collector.close()
    pytest.importorskip("torch")


def test_tui_record_shows_the_commands_gpu_and_records_its_peak(
    driver: None, pane: Pane, tmp_path: Path
) -> None:
    session = tmp_path / "session"
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        sys.executable,
        "-m",
        "gpuherd",
        "--tui",
        "--record",
        str(session),
        "--",
        sys.executable,
        "-c",
        TRAIN,
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 60",
        180,
        50,
    )
    # The command's row gets the GPU of its process, with that GPU's utilization.
    gpu_cell = re.compile(r"command\s+running\s.*\s\d+(,\d+)* \d+%\s")
    screen = pane.wait_for(lambda s: gpu_cell.search(s) is not None, timeout_s=90)
    assert "Traceback" not in screen
    screen = pane.wait_for(lambda s: "recording saved in" in s, timeout_s=120)
    row = next(line for line in screen.splitlines() if line.lstrip("│ ").startswith("command"))
    assert "step 400" in row and "acc" in row
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=0" in screen
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit_code"] == 0 and meta["run_peaks"]
    assert meta["run_peaks"][0]["peak_bytes"] > 0
    assert "train/loss" in (session / "metrics.csv").read_text()
    summary = json.loads((session / "summary.json").read_text())
    assert summary["gpus"] and summary["tasks"]

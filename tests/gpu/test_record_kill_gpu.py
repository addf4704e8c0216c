"""kill -9 of the recorder on a GPU host: the torch training it recorded runs on to its end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recorded import wait_until

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
STEPS = 60

TRAIN = f"""
import time
import torch
model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 1024, device="cuda")
for step in range({STEPS}):
    loss = (model(x) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    torch.cuda.synchronize()
    print(f"step={{step}} loss={{loss.item():.6f}}", flush=True)
    time.sleep(0.1)
print("done", flush=True)
"""


def test_kill_9_of_the_recorder_leaves_the_gpu_training_running(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    session = tmp_path / "s"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(session),
            "--",
            sys.executable,
            "-c",
            TRAIN,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    log = session / "command.log"
    wait_until(lambda: log.exists() and "step=10 " in log.read_text(), timeout_s=120.0)
    recorder.send_signal(signal.SIGKILL)
    recorder.wait(timeout=10)
    wait_until(lambda: (session / "command.exit.json").exists(), timeout_s=120.0)
    assert json.loads((session / "command.exit.json").read_text())["exit_code"] == 0
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines[:-1]] == [f"step={i}" for i in range(STEPS)]
    assert lines[-1] == "done"

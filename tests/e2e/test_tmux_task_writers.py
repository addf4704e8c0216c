"""`gpuherd monitor --log` in a real tmux pane: each task row names the real process that writes
its log, with that process's GPU, pid and VRAM, and turns finished when the process exits.

Everything is real but the driver: a fake NVML lists the two writers' pids on GPUs 0 and 1
(tests/gpu/test_task_writers_gpu.py does the same on a real GPU with real trainings).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.task_screen import task_cells
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

WRITE = r"""
import sys, time
step = 0
while True:
    step += 1
    print(f"step={step} loss={1.0 / step:.4f}", flush=True)
    time.sleep(0.2)
"""
DASHBOARD = r"""
import sys
from collectors.machine.nvml import ProcessEntry
from gpuherd.dashboard import monitor
from gpuherd.sources import log_sources
from tests.fakes import FakeGpu, FakeNvml, GiB
pids, logs = [int(p) for p in sys.argv[1].split(",")], sys.argv[2:]
gpus = [FakeGpu(uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000", util=(90, 40),
                compute=[ProcessEntry(pid, (i + 2) * GiB)]) for i, pid in enumerate(pids)]
plan = monitor.live_plan(0.5, nvml_backend=FakeNvml(gpus))
plan.logs = log_sources(logs, [])
plan.collectors = [*plan.collectors, *plan.logs.collectors]
sys.exit(monitor.show(plan))
"""
VRAM = re.compile(r"\d+(\.\d+)? (MiB|GiB)")


def test_task_rows_show_their_writers_gpu_pid_and_vram_then_finished(
    pane: Pane, tmp_path: Path
) -> None:
    runs = []
    for name in ("alpha", "beta"):
        log = tmp_path / name / "train.log"
        log.parent.mkdir()
        with open(log, "w") as out:  # the writer holds its stdout, the log, open for writing
            runs.append(
                (
                    f"{name}/train.log",
                    subprocess.Popen(
                        [sys.executable, "-c", WRITE], stdout=out, stderr=subprocess.STDOUT
                    ),
                )
            )
    try:
        pids = ",".join(str(proc.pid) for _, proc in runs)
        logs = [str(tmp_path / name / "train.log") for name in ("alpha", "beta")]
        argv = ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-c", DASHBOARD, pids, *logs]
        pane.start(f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; sleep 30", 160, 50)
        for index, (label, proc) in enumerate(runs):
            screen = pane.wait_for(
                lambda s, label=label, proc=proc: (
                    (task_cells(s, label) or {}).get("PID") == str(proc.pid)
                ),
                timeout_s=30,
            )
            cells = task_cells(screen, label)
            assert cells is not None
            assert cells["STATUS"] == "running"
            assert cells["GPU"].split()[0] == str(index)
            assert cells["VRAM"] == f"{index + 2}.0 GiB"
            assert any(
                str(proc.pid) in line and f"{label}: " in line for line in screen.splitlines()
            ), screen  # the process row's task
        first, proc = runs[0]
        proc.kill()
        proc.wait()
        screen = pane.wait_for(
            lambda s: (task_cells(s, first) or {}).get("STATUS") == "finished", timeout_s=30
        )
        assert (task_cells(screen, runs[1][0]) or {}).get("STATUS") == "running"
        assert VRAM.fullmatch((task_cells(screen, runs[1][0]) or {}).get("VRAM", ""))
        pane.keys("q")
    finally:
        for _, proc in runs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

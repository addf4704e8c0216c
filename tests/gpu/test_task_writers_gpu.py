"""A real Lightning run and a real Hugging Face Trainer run on the GPU, followed live by the
dashboard in a real tmux pane: each task row shows the GPU index, pid and VRAM of the process
that writes its log, the process rows name the tasks, and each turns finished when it exits.
A third run, Lightning's `CSVLogger`, is followed through its `metrics.csv`, which Lightning
opens and closes at each flush: its writer is found by working directory.

    pytest -m gpu tests/gpu/test_task_writers_gpu.py
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import CollectorUnavailable
from collectors.machine.nvml import NvmlCollector
from gpuherd.tasks.view import label_of
from tests.e2e.task_screen import task_cells
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

WORKLOADS = Path(__file__).resolve().parent / "workloads"
VRAM = re.compile(r"\d+(\.\d+)? (MiB|GiB)")
START_S = 240.0
"""Imports, CUDA start-up and the first scan; torch and transformers import slowly cold."""
RUN_S = 300.0
"""Until all three runs have exited (each trains for about 40 s once started)."""


@pytest.fixture
def pane(request: pytest.FixtureRequest) -> Iterator[Pane]:
    pane = Pane(f"gpuherd-writers-{time.monotonic_ns()}")
    yield pane
    pane.tmux("kill-server")


def gpu_index_of(pid: int) -> int | None:
    """The NVML index of the GPU that lists `pid`, read through gpuherd's own collector."""
    collector = NvmlCollector()
    try:
        collector.open()
    except CollectorUnavailable as error:
        pytest.skip(f"no NVIDIA driver here: {error}")
    try:
        tick = collector.sample()
    finally:
        collector.close()
    return next(
        (gpu.index for gpu in tick.devices if any(p.pid == pid for p in gpu.processes or ())), None
    )


Run = tuple[str, "subprocess.Popen[bytes]", Path, Path]
"""A task's label, its training process, the log followed and the console log."""


def start_run(tmp_path: Path, name: str, argv: list[str], follow: str = "train.log") -> Run:
    """Start a training in `<tmp>/<name>` with stdout and stderr in `train.log` there (the run
    holds it); the dashboard follows `follow`, a path under that directory."""
    log = tmp_path / name / "train.log"
    log.parent.mkdir()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-u", *argv], stdout=out, stderr=subprocess.STDOUT, cwd=log.parent
        )
    followed = log.parent / follow
    return label_of(str(followed)), proc, followed, log


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def test_real_trainings_rows_show_gpu_pid_vram_then_finished(pane: Pane, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("lightning")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    runs = [
        start_run(tmp_path, "lightning", [str(WORKLOADS / "tiny_lightning.py")]),
        start_run(tmp_path, "hf", [str(WORKLOADS / "tiny_hf_trainer.py"), "out"]),
        start_run(
            tmp_path,
            "csv",
            [str(WORKLOADS / "tiny_lightning.py"), "--csv"],
            follow="lightning_logs/version_0/metrics.csv",
        ),
    ]
    try:
        logs = [str(log) for _, _, log, _ in runs]
        argv = [
            "env",
            "-u",
            "COLUMNS",
            "-u",
            "LINES",
            sys.executable,
            "-m",
            "gpuherd",
            "--interval",
            "0.5",
            *[arg for log in logs for arg in ("--log", log)],
        ]
        pane.start(f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; sleep 60", 160, 50)

        # Each row is checked while its run trains: the pid its GPU lists, that GPU's index,
        # and a VRAM figure, on the task row; the task's name on the process row.
        seen: dict[str, dict[str, str]] = {}
        deadline = time.monotonic() + START_S
        screen = ""
        while len(seen) < len(runs):
            for label, proc, _, log in runs:
                assert proc.poll() is None or label in seen, (
                    f"{label} exited ({proc.returncode}) before its row showed it:\n"
                    f"{tail(log)}\n{screen}"
                )
            assert time.monotonic() < deadline, f"rows never showed their pids:\n{screen}"
            screen = pane.text()
            for label, proc, _, _ in runs:
                cells = task_cells(screen, label)
                if label in seen or cells is None or cells.get("PID") != str(proc.pid):
                    continue
                index = gpu_index_of(proc.pid)
                named = any(
                    str(proc.pid) in line and f"{label}: " in line for line in screen.splitlines()
                )
                if index is None or not VRAM.fullmatch(cells.get("VRAM", "")) or not named:
                    continue  # the GPU lists it a moment later than /proc shows it
                assert cells["STATUS"] == "running", screen
                assert cells["GPU"].split()[0] == str(index), screen
                seen[label] = cells
            time.sleep(0.2)

        for label, proc, _, log in runs:
            try:
                code = proc.wait(timeout=RUN_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{label} did not finish:\n{tail(log)}")
            assert code == 0, f"{label} failed ({code}):\n{tail(log)}"
        screen = pane.wait_for(
            lambda s: all(
                (task_cells(s, label) or {}).get("STATUS") == "finished" for label, *_ in runs
            ),
            timeout_s=30,
        )
        for label, proc, _, _ in runs:
            cells = task_cells(screen, label)
            assert cells is not None and cells["PID"] == str(proc.pid), screen
        assert "Traceback" not in screen
        pane.keys("q")
    finally:
        for _, proc, _, _ in runs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

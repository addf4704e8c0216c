"""Pilot test: a real process writes a real log; its task row shows pid, GPU and VRAM, the
process row the task's name, and the task turns finished when the process exits.

NVML is the one fake: the scripted GPU lists the real writer's pid on GPU 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.widgets import Static

from collectors.logs.logtail import LogTailCollector
from collectors.machine.writers import WriterCollector, WriterWatch
from collectors.samples import GpuProcess
from tests.app.helpers import UUID1, GiB, ScriptedCollector, gpu, tick, until
from tests.app.test_app_tasks import plain
from tui.app import GpuherdApp, make_app
from tui.screens.task_detail import TaskDetailScreen
from tui.widgets.process_table import ProcessTable
from tui.widgets.tasks_panel import TasksPanel

TRAIN = r"""
import sys, time
with open(sys.argv[1], "a", buffering=1) as log:
    step = 0
    while True:
        step += 1
        log.write(f"step={step} loss={1.0 / step:.4f}\n")
        time.sleep(0.1)
"""


def cell(app: GpuherdApp, task_id: str, column: str) -> str:
    return app.get_default_screen().query_one(TasksPanel).get_cell(task_id, column).plain


def has_cell(app: GpuherdApp, task_id: str, column: str) -> bool:
    table = app.get_default_screen().query_one(TasksPanel)
    return task_id in {k.value for k in table.rows} and column in {k.value for k in table.columns}


async def test_the_task_row_shows_its_writers_pid_gpu_and_vram_then_finished(
    tmp_path: Path,
) -> None:
    log = tmp_path / "exp1" / "train.log"
    log.parent.mkdir()
    log.touch()
    child = subprocess.Popen([sys.executable, "-c", TRAIN, str(log)])
    try:
        gpus = ScriptedCollector()
        listed = tick(gpu(0, processes=()), gpu(1, processes=(GpuProcess(child.pid, 3 * GiB),)))
        gpus.push(listed)
        tail = LogTailCollector(str(log))
        writers = WriterCollector(WriterWatch(), interval_s=0.1, scan_every_s=0.5)
        app = make_app([gpus, tail, writers], hostname="box")
        async with app.run_test(size=(160, 40)) as pilot:
            task = str(log)
            await until(
                pilot,
                lambda: has_cell(app, task, "pid") and cell(app, task, "pid") == str(child.pid),
                timeout_s=20,
            )
            assert cell(app, task, "status") == "running"
            assert cell(app, task, "gpu").split()[0] == "1"  # GPU 1, where its pid is listed
            assert cell(app, task, "vram") == "3.0 GiB"
            table = app.get_default_screen().query_one(ProcessTable)
            await until(
                pilot,
                lambda: "exp1/train.log: " in table.cell_texts(f"{UUID1}/{child.pid}")["command"],
            )
            await pilot.press("t", "enter")  # the detail screen names the process too
            await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen))
            facts = app.screen.query_one("#task-facts", Static)
            await until(pilot, lambda: f"pid {child.pid}  VRAM 3.0 GiB" in plain(facts))
            assert "stalled after" in plain(facts)
            await pilot.press("escape")
            child.kill()
            child.wait()
            gpus.push(tick(gpu(0, processes=()), gpu(1, processes=())))
            await until(pilot, lambda: cell(app, task, "status") == "finished", timeout_s=20)
            assert cell(app, task, "pid") == str(child.pid)  # the last writer stays named
            assert cell(app, task, "vram") == ""  # it holds no GPU memory any more
            gpus.finish()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()

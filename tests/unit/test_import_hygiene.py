"""Headless entry points must never import Textual (STYLE section 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEADLESS_MODULES = [
    "collectors.base",
    "collectors.loop",
    "collectors.samples",
    "parsers.model",
    "gpuherd.cli",
    "gpuherd.common.exit_codes",
    "gpuherd.commands.monitor",
    "gpuherd.commands.replay",
    "gpuherd.commands.demo",
    "gpuherd.commands.record",
    "gpuherd.commands.snapshot",
    "gpuherd.commands.parse",
    "gpuherd.commands.summarize",
    "gpuherd.commands.note",
    "gpuherd.commands.queue",
    "gpuherd.queue.queue_command",
    "gpuherd.queue.liveness",
    "gpuherd.queue.control",
    "gpuherd.record.command",
    "gpuherd.record.recording",
    "gpuherd.summary.summarize_command",
    "gpuherd.note.note_command",
    "gpuherd.record.dashboard",
    "gpuherd.proc.child",
    "gpuherd.proc.tree",
    "gpuherd.dashboard.monitor_record",
    "gpuherd.tasks.hints",
    "gpuherd.sources",
    "collectors.replay.replay_metrics",
    "gpuherd.commands.serve_metrics",
    "gpuherd.commands.fleet",
    "gpuherd.export.headless",
    "gpuherd.export.exporter",
    "gpuherd.fleet.view",
    "gpuherd.fleet.source",
]


@pytest.mark.parametrize("module", HEADLESS_MODULES)
def test_headless_module_does_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


START_PATHS = [
    "gpuherd.record.command",
    "gpuherd.queue.runner",
    "gpuherd.dashboard.monitor",
    "tui.app",
]
"""What `record`, `queue run` and the dashboard import before they start: a queued job's launch
waits for `gpuherd record` to start, and the dashboard's first frame for its imports."""


@pytest.mark.parametrize("module", START_PATHS)
def test_start_paths_leave_the_summary_libraries_for_later(module: str) -> None:
    # pandas, numpy and plotext's figure module cost about a third of a second to import; the
    # summary loads them when it is written, the dashboard's chart once its first frame is up
    code = (
        f"import sys, {module}; "
        "print(sorted({'pandas', 'numpy', 'plotext._figure'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_first_frame_leaves_the_walk_the_trackers_and_the_tasks_for_later() -> None:
    # What `run_app` imports before it paints the plain first frame; the discovery walk, the
    # trackers' readers and the tasks' model load with the dashboard after it.
    code = (
        "import sys, gpuherd.dashboard.monitor, gpuherd.engine.gate, tui.first_paint_term; "
        "print(sorted({'collectors.logs.discovery', 'collectors.trackers.stores', "
        "'gpuherd.tasks.hints'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_linter_contracts_hold() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_queue_commands_that_need_no_gpu_leave_nvml_unloaded() -> None:
    # `queue ls`, `add`, `cancel`, `show`: a person runs them often, and tests run them hundreds
    # of times; NVML loads only where a GPU is counted (`queue add --gpus K`)
    code = "import sys, gpuherd.cli, gpuherd.queue.queue_command; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

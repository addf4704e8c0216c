"""Many followed logs in many directories: every one gets its row, and the dashboard still quits.

Real log files, the real discovery, tails and watchdog waker, written by the test while the
dashboard runs on this (2-core) machine.
"""

from __future__ import annotations

import asyncio
import faulthandler
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from gpuherd.sources import log_sources
from tests.app.helpers import T0, until
from tests.depth import depth
from tests.stacks import thread_stacks
from tui.app import GpuherdApp, make_app
from tui.widgets.tasks_panel import TasksPanel

SIZE = (160, 50)
STUCK_S = 120.0
"""Far beyond what any step here takes on a loaded 2-core machine: past it the dashboard is
stuck (a deadlock), and the test fails with every thread's stack instead of hanging."""


def rows(app: GpuherdApp) -> set[str]:
    table = app.get_default_screen().query_one(TasksPanel)
    return {str(key.value) for key in table.rows}


def cell(app: GpuherdApp, task_id: str, column: str) -> str:
    return str(app.get_default_screen().query_one(TasksPanel).get_cell(task_id, column))


async def until_or_dump(pilot: Pilot[object], condition: Callable[[], bool], what: str) -> None:
    try:
        await until(pilot, condition, timeout_s=STUCK_S)
    except AssertionError:
        raise AssertionError(f"{what}; every thread's stack:\n{thread_stacks()}") from None


def make_logs(root: Path, dirs: int, per_dir: int) -> list[Path]:
    paths = [root / f"run{d}" / f"rank{i}.log" for d in range(dirs) for i in range(per_dir)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    return paths


def write_lines(paths: list[Path], lines_per_s: float, count: int, first: int = 1) -> None:
    """Append lines `step=N loss=1/N` for N from `first` on, `count` to every file at
    `lines_per_s` each, flushing each."""
    files = [path.open("a") for path in paths]
    try:
        start = time.monotonic()
        for n in range(first, first + count):
            for f in files:
                f.write(f"step={n} loss={1 / n:.6g}\n")
                f.flush()
            time.sleep(max(0.0, start + (n - first + 1) / lines_per_s - time.monotonic()))
    finally:
        for f in files:
            f.close()


def dashboard(pattern: Path) -> tuple[GpuherdApp, Callable[[], None]]:
    """The dashboard following `--log PATTERN`, built as `gpuherd --log` builds it."""
    sources = log_sources([str(pattern)], [], interval_s=0.5)
    app = make_app(sources.collectors, clock=lambda: T0, hostname="box", tail=sources.tail)

    def close() -> None:
        # On a thread: a deadlocked watchdog observer must fail the test, not hang it.
        closer = threading.Thread(target=sources.close, name="close-waker", daemon=True)
        closer.start()
        closer.join(STUCK_S)
        if closer.is_alive():
            raise AssertionError(f"closing the waker hangs; stacks:\n{thread_stacks()}")

    return app, close


def every_log_read(app: GpuherdApp, paths: list[Path], lines: int) -> bool:
    views = [app.state.tasks.view(str(p)) for p in paths]
    return all(v is not None and v.lines_read == lines and v.step == lines for v in views)


async def test_fifty_logs_in_five_directories_all_get_their_row_and_metrics(tmp_path: Path) -> None:
    # Asyncio's executor holds at most 32 threads, so collectors run as thread workers
    # showed 32 - 1 (discovery) logs at the very most; on 2 cores, 5.
    paths = make_logs(tmp_path, dirs=5, per_dir=10)
    write_lines(paths, lines_per_s=1000, count=5)
    app, close = dashboard(tmp_path / "run*" / "*.log")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until_or_dump(
                pilot, lambda: rows(app) == {str(p) for p in paths}, "not every log got a row"
            )
            await until_or_dump(
                pilot, lambda: every_log_read(app, paths, 5), "not every log was read"
            )
            # More lines later: every tail keeps following its file.
            await asyncio.to_thread(write_lines, paths, 1000, 3, 6)
            await until_or_dump(
                pilot,
                lambda: all(cell(app, str(p), "loss") == "0.125" for p in paths),
                "not every row updated",
            )
            assert every_log_read(app, paths, 8)
        assert len(app.state.tasks.task_ids) == 50
        assert not app.threads.alive()  # quitting stopped all 51 collector threads
    finally:
        close()


DIRS, PER_DIR, LINES_PER_S, WRITE_S, RUNS = 8, 4, 100, 2.0, depth(2, 5)


async def run_once(root: Path) -> tuple[float, list[str]]:
    """Logs written while their tails start; once all is read, `q`.

    Returns:
        Seconds from `q` until the app had stopped, and the collectors still running then.
    """
    paths = make_logs(root, DIRS, PER_DIR)
    lines = int(LINES_PER_S * WRITE_S)
    app, close = dashboard(root / "run*" / "*.log")
    try:
        async with app.run_test(size=SIZE) as pilot:
            writer = threading.Thread(
                target=write_lines, args=(paths, LINES_PER_S, lines), name="writer", daemon=True
            )
            writer.start()
            await until_or_dump(pilot, lambda: not writer.is_alive(), "the writer is stuck")
            await until_or_dump(
                pilot,
                lambda: every_log_read(app, paths, lines),
                "the dashboard stopped reading the logs",
            )
            await pilot.press("q")
            asked = time.monotonic()
        return time.monotonic() - asked, app.threads.alive()
    finally:
        close()


@pytest.mark.slow
async def test_many_logs_written_at_100_lines_per_second_never_freeze_the_dashboard(
    tmp_path: Path,
) -> None:
    """The guard of the style guide: a lock-order inversion once froze the dashboard here."""
    for run in range(RUNS):
        # A backstop for a frozen event loop, which no timeout inside the loop can catch.
        faulthandler.dump_traceback_later(STUCK_S * 3, exit=False)
        try:
            quit_s, alive = await asyncio.wait_for(run_once(tmp_path / f"run{run}"), STUCK_S * 2)
        except TimeoutError:
            pytest.fail(f"run {run}: the dashboard did not quit; stacks:\n{thread_stacks()}")
        finally:
            faulthandler.cancel_dump_traceback_later()
        # A hang detector, not a speed test: quitting waits at most 5 s for the collectors.
        assert quit_s < 30, f"run {run}: quitting took {quit_s:.1f} s"
        assert alive == []

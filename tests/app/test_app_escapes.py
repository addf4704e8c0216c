"""What others wrote reaches the dashboard as text: control characters shown, never obeyed.

A log file really named with `ESC [2J` under `--watch` (real files, the real discovery and
tails), processes, users and containers whose names carry escapes and markup: every table,
title and toast shows them made visible, and the screen never receives them raw.
"""

from __future__ import annotations

from pathlib import Path

from collectors.base import CollectorError
from collectors.roles import CONTAINERS, HOST, LOG
from collectors.samples import ContainerSample, ContainerTick, GpuProcess, ProcessInfo
from gpuherd.sources import log_sources
from tests.app.helpers import T0, GiB, MiB, ScriptedCollector, gpu, host, tick, until
from tui.app import GpuherdApp, make_app
from tui.screens.task_detail import TaskDetailScreen
from tui.widgets.container_panel import ContainerPanel
from tui.widgets.process_table import ProcessTable, visible_keys
from tui.widgets.tasks_panel import TasksPanel

SIZE = (180, 50)
EVIL = "\x1b[2J\x1b[31mowned\x9b1;1H\u202e"
"""Clear the screen, turn red, move the cursor (C1 CSI), then show the rest backwards."""
SHOWN = "\\x1b[2J\\x1b[31mowned\\x9b1;1H\\u202e"


def raw_controls(app: GpuherdApp) -> list[str]:
    """Control characters in what the screen shows (its SVG export holds the cells' text)."""
    screen = app.export_screenshot()
    return sorted({repr(c) for c in screen if c in "\x1b\x9b\u202e\x07\x08"})


def task_cell(app: GpuherdApp, task_id: str, column: str) -> str:
    return app.get_default_screen().query_one(TasksPanel).get_cell(task_id, column).plain


async def test_a_log_named_with_escapes_under_watch_is_shown_not_obeyed(tmp_path: Path) -> None:
    run = tmp_path / "runs"
    run.mkdir()
    log = run / f"{EVIL}.log"
    log.write_text(
        f"step=1 loss=0.5\nstep=2 loss=nan\ntorch.OutOfMemoryError: CUDA out of memory. {EVIL}\n"
    )
    sources = log_sources([], [str(run)], interval_s=0.2)
    app = make_app(sources.collectors, clock=lambda: T0, hostname="box", tail=sources.tail)
    try:
        async with app.run_test(size=SIZE) as pilot:
            panel = app.get_default_screen().query_one(TasksPanel)
            await until(
                pilot,
                lambda: (
                    str(log) in {str(k.value) for k in panel.rows}
                    and "NaN" in task_cell(app, str(log), "health")
                ),
            )
            assert task_cell(app, str(log), "task").endswith(f"{SHOWN}.log")
            assert raw_controls(app) == []
            await pilot.press("t", "enter")  # the task's details
            await until(
                pilot,
                lambda: (
                    isinstance(app.screen, TaskDetailScreen)
                    and SHOWN in str(app.screen.query_one("#task-title").render())
                ),
            )
            findings = str(app.screen.query_one("#task-findings-text").render())
            # Log lines lose their ANSI colour sequences when read; what is left shows.
            assert "CUDA out of memory. owned\\x9b1;1H\\u202e" in findings
            assert raw_controls(app) == []
    finally:
        sources.close()


async def test_processes_users_and_containers_with_escapes_show_them_visibly() -> None:
    cid = "e" * 64
    sources = [
        ScriptedCollector("nvml"),
        ScriptedCollector("host", role=HOST),
        ScriptedCollector("docker", role=CONTAINERS),
    ]
    app = make_app(sources, clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        gpus, hosts, docker = sources
        hosts.push(
            host(
                processes=(
                    ProcessInfo(
                        4242, f"[b]mallory{EVIL}", f"python {EVIL}", 10.0, GiB, T0 - 60, cid[:12]
                    ),
                )
            )
        )
        await until(pilot, lambda: app.state.host_sample is not None)
        gpus.push(tick(gpu(0, processes=(GpuProcess(4242, 3 * GiB),))))
        docker.push(
            ContainerTick(
                T0,
                (
                    ContainerSample(
                        id=cid,
                        short_id=cid[:12],
                        name=f"[red]box{EVIL}",
                        image=f"img{EVIL}",
                        status="running",
                        started_at=T0 - 65,
                        cpu_pct=1.0,
                        memory_used_bytes=MiB,
                        memory_limit_bytes=None,
                        pids=1,
                    ),
                ),
                engine="Docker",
            )
        )
        table = app.screen.query_one(ProcessTable)
        panel = app.screen.query_one(ContainerPanel)
        await until(
            pilot,
            lambda: (
                panel.row_count == 1
                and table.row_count == 1
                and "[red]" in table.cell_texts(visible_keys(table)[0])["command"]
            ),
        )
        row = table.cell_texts(visible_keys(table)[0])
        assert row["user"] == f"[b]mallory{SHOWN}"
        assert row["command"] == f"[[red]box{SHOWN}] python {SHOWN}"
        assert [cell.plain for cell in panel.get_row_at(0)][:2] == [
            f"[red]box{SHOWN}",
            f"img{SHOWN}",
        ]
        await pilot.press("c", "enter")  # filter the processes to the container: its name
        await until(
            pilot, lambda: "container:" in str(app.screen.query_one("#processes").border_subtitle)
        )
        assert SHOWN in str(app.screen.query_one("#processes").border_subtitle)
        assert raw_controls(app) == []
        for source in sources:
            source.finish()


async def test_a_failing_source_named_with_escapes_toasts_and_titles_visibly() -> None:
    path = f"/runs/{EVIL}.log"
    source = ScriptedCollector(f"log:{path}", role=LOG, task_id=path)
    app = make_app([source], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        source.push(CollectorError(f"cannot read {path}: [b]permission denied", title="Log"))
        await until(pilot, lambda: any(SHOWN in n.message for n in app._notifications))
        toast = next(n for n in app._notifications if SHOWN in n.message)
        assert toast.message == f"cannot read /runs/{SHOWN}.log: [b]permission denied"
        assert not toast.markup and toast.title == f"Log (log:/runs/{SHOWN}.log)"
        await pilot.pause(0.3)
        assert raw_controls(app) == []
        source.finish()

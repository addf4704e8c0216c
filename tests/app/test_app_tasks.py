"""Pilot tests of the tasks panel and the task detail screen: log batches in, rows out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from collectors.base import CollectorError, Failed, Sampled
from collectors.logs.discovery import DiscoveryCollector, LogDiscovery
from collectors.logs.logtail import LogTailCollector
from collectors.replay.replay import SessionReplay
from collectors.samples import GpuProcess, LogBatch
from gpuherd.tasks.hints import TaskHint
from parsers.model import LogFinding, LogMetric
from tests.app.helpers import (
    T0,
    UUID0,
    ScriptedCollector,
    collectors_done,
    events,
    gpu,
    gpu_source,
    scripted_log,
    tick,
    until,
)
from tests.fakes import FakeCollector
from tui.app import GpuherdApp, make_app
from tui.screens.task_detail import TaskDetailScreen
from tui.widgets.plot import Plot
from tui.widgets.tasks_panel import TasksPanel

SIZE = (160, 50)
TASKS_SESSION = Path(__file__).resolve().parents[1] / "data" / "sessions" / "tasks"
LOG = "/runs/exp1/train.log"


def metric(step: int, **values: float) -> LogMetric:
    return LogMetric(tuple(values.items()), step=step)


def batch(
    t: float, *metrics: LogMetric, first_line: int = 1, findings=(), path: str = LOG
) -> LogBatch:
    numbered = tuple((first_line + i, m) for i, m in enumerate(metrics))
    return LogBatch(
        path,
        t,
        "generic",
        numbered,
        tuple(findings),
        lines_read=len(metrics),
        generation=1,
        file_path=path,
    )


def cell(app: GpuherdApp, task_id: str, column: str) -> str:
    table = app.get_default_screen().query_one(TasksPanel)
    return str(table.get_cell(task_id, column))


def plain(widget: object) -> str:
    """What a Static shows, as plain text (rich tables rendered at 100 columns)."""
    console = Console(width=100, color_system=None)
    with console.capture() as captured:
        console.print(widget.content)  # type: ignore[attr-defined]
    return captured.get()


def has_row(app: GpuherdApp, task_id: str) -> bool:
    table = app.get_default_screen().query_one(TasksPanel)
    return task_id in {key.value for key in table.rows}


async def test_no_tasks_keeps_the_panel_and_its_key_hidden() -> None:
    app = make_app([gpu_source(tick())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await pilot.pause()
        assert not app.screen.query_one("#tasks").display
        assert app.screen.check_action("focus_tasks", ()) is False


async def test_batches_become_a_row_with_metrics_and_a_nan_badge() -> None:
    messages: list[object] = []
    batches = [
        batch(T0, metric(10, **{"train/loss": 2.31, "lr": 0.001})),
        batch(
            T0 + 1,
            metric(20, **{"train/loss": 1.75}),
            metric(20, **{"val/acc": 0.4321}),
            first_line=2,
        ),
        batch(
            T0 + 2,
            metric(30, **{"train/loss": float("nan")}),
            first_line=4,
            findings=[(4, LogFinding("nan", "train/loss = nan at step 30"))],
        ),
    ]
    log = FakeCollector(batches, name=f"log:{LOG}", role="log", task_id=LOG)
    app = make_app([log], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await collectors_done(pilot, app)
        await until(pilot, lambda: has_row(app, LOG) and "NaN" in cell(app, LOG, "health"))
        # Each batch arrived as its own message: none was replaced by a later one.
        assert len([e for e in events(messages, Sampled) if isinstance(e.sample, LogBatch)]) == 3
        assert app.screen.query_one("#tasks").display
        assert cell(app, LOG, "task") == LOG  # the whole path, as there is room for it
        assert cell(app, LOG, "progress") == "step 30"
        assert cell(app, LOG, "loss") == "NaN"
        assert cell(app, LOG, "val") == "acc 0.4321"
        view = app.state.tasks.view(LOG)
        assert view is not None and view.worst_severity == "error"
        assert app.screen.check_action("focus_tasks", ()) is True


async def test_enter_on_a_row_opens_the_detail_screen_with_charts() -> None:
    steps = [
        batch(T0 + i, metric(10 * i, **{"train/loss": 2.0 / (i + 1)}), first_line=i + 1)
        for i in range(12)
    ]
    steps.append(
        batch(
            T0 + 12,
            metric(120, **{"val/loss": 0.4, "val/acc": 0.81}),
            first_line=13,
            findings=[(13, LogFinding("oom", "CUDA out of memory"))],
        )
    )
    gpus = ScriptedCollector("nvml")
    log = FakeCollector(steps, name=f"log:{LOG}", role="log", task_id=LOG)
    app = make_app(
        [gpus, log],
        clock=lambda: T0,
        hostname="box",
        task_hints=[TaskHint(LOG, gpu_uuids=(UUID0,))],
    )
    async with app.run_test(size=SIZE) as pilot:
        gpus.push(tick(gpu(0, gpu_util_pct=55.0), t=T0 + 12))
        await until(pilot, lambda: has_row(app, LOG) and "OOM" in cell(app, LOG, "health"))
        await until(pilot, lambda: cell(app, LOG, "gpu") == "0 55%")
        await pilot.press("t")
        assert isinstance(app.focused, TasksPanel)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen))
        screen = app.screen
        await until(pilot, lambda: bool(screen.query_one("#loss-chart", Plot).series))
        loss = screen.query_one("#loss-chart", Plot)
        val = screen.query_one("#val-chart", Plot)
        assert [s.label for s in loss.series] == ["train/loss", "val/loss"]
        assert loss.series[0].xs == tuple(float(10 * i) for i in range(12))
        assert [s.label for s in val.series] == ["val/acc"]
        assert str(screen.query_one("#loss-box").border_title) == "loss over steps"
        findings = plain(screen.query_one("#task-findings-text"))
        assert "OOM" in findings and "line 13" in findings and "CUDA out of memory" in findings
        facts = plain(screen.query_one("#task-facts"))
        assert "GPU 0" in facts and "util 55%" in facts and "lines read" in facts
        await pilot.press("escape")
        assert not isinstance(app.screen, TaskDetailScreen)
        gpus.finish()


async def test_a_failing_log_shows_its_error_on_its_row_and_recovers() -> None:
    log = scripted_log(LOG)
    app = make_app([log], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        log.push(CollectorError(f"{LOG}: permission denied", title="log"))
        await until(pilot, lambda: has_row(app, LOG))
        assert cell(app, LOG, "status") == "error"
        assert "permission denied" in cell(app, LOG, "health")
        assert app.screen.query_one("#tasks").has_class("-error")
        log.push(batch(T0, metric(1, **{"train/loss": 1.5})))
        await until(pilot, lambda: cell(app, LOG, "loss") == "1.5")
        assert "permission denied" not in cell(app, LOG, "health")
        assert not app.screen.query_one("#tasks").has_class("-error")
        log.finish()


async def test_replayed_metrics_drive_the_tasks_panel() -> None:
    replay = SessionReplay(TASKS_SESSION, speed=1e6)
    from gpuherd.tasks.hints import replay_hints

    app = make_app(
        replay.collectors(),
        clock=lambda: T0,
        hostname="box",
        replay_label="REPLAY test x1e6",
        task_hints=replay_hints(replay.session),
    )
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        detr = "/runs/detr/train.log"
        await until(
            pilot,
            lambda: (
                has_row(app, "command")
                and has_row(app, detr)
                and cell(app, "command", "val") == "acc 0.7731"
            ),
        )
        assert cell(app, "command", "progress") == "step 300 · ep 2"
        assert cell(app, "command", "speed") == "11.5 it/s"
        assert cell(app, "command", "gpu").startswith("0")  # the GPU of run_peaks
        assert cell(app, detr, "loss") == "NaN" and "NaN" in cell(app, detr, "health")
        assert app.state.tasks.view("command").format == "tqdm"  # type: ignore[union-attr]


async def test_discovered_logs_are_tailed_and_a_directory_shows_its_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    log = run / "train.log"
    log.write_text("step=10 loss=2.31 lr=0.001\nstep=20 loss=2.10 lr=0.001\n")
    missing = tmp_path / "later" / "train.log"
    bad = tmp_path / "a_directory"
    bad.mkdir()
    discovery = LogDiscovery([str(log), str(missing), str(bad)])
    tails: list[LogTailCollector] = []

    def tail(path: str) -> LogTailCollector:
        tails.append(LogTailCollector(path, poll=True, poll_interval_s=0.05))
        return tails[-1]

    app = make_app(
        [DiscoveryCollector(discovery, interval_s=0.2)], clock=lambda: T0, hostname="box", tail=tail
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: has_row(app, str(log)) and cell(app, str(log), "loss") == "2.1")
        await until(pilot, lambda: has_row(app, str(bad)) and has_row(app, str(missing)))
        await until(pilot, lambda: "directory" in cell(app, str(bad), "health"))
        assert cell(app, str(bad), "status") == "error"
        assert cell(app, str(missing), "status") == "waiting"
        with log.open("a") as f:
            f.write("step=30 loss=nan lr=0.001\n")
        await until(pilot, lambda: "NaN" in cell(app, str(log), "health"))
        # One tail per log however many scans ran.
        await pilot.pause(0.5)
        assert sorted(t.path for t in tails) == sorted([str(log), str(missing), str(bad)])


async def test_a_run_that_disappears_loses_its_row_and_its_tail(tmp_path: Path) -> None:
    run = tmp_path / "exp" / "version_0"
    run.mkdir(parents=True)
    csv = run / "metrics.csv"
    csv.write_text("epoch,step,train_loss\n0,9,1.25\n")
    discovery = LogDiscovery(watch=[str(tmp_path)])

    def tail(path: str) -> LogTailCollector:
        return LogTailCollector(path, poll=True, poll_interval_s=0.05)

    app = make_app(
        [DiscoveryCollector(discovery, interval_s=0.2)], clock=lambda: T0, hostname="box", tail=tail
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: has_row(app, str(csv)) and cell(app, str(csv), "loss") != "")
        os.remove(csv)
        os.rmdir(run)
        await until(pilot, lambda: not has_row(app, str(csv)))
        await until(pilot, lambda: f"log:{csv}" not in app.threads.alive())
        assert not app.screen.query_one("#tasks").display


@pytest.mark.parametrize("owner", [True, False])
async def test_a_task_hint_maps_the_commands_pid_to_its_gpu(owner: bool) -> None:
    gpus = ScriptedCollector("nvml")
    log = scripted_log("/s/command.log")
    hint = TaskHint("/s/command.log", label="command", owns_pid=lambda pid: owner and pid == 777)
    app = make_app([gpus, log], clock=lambda: T0, hostname="box", task_hints=[hint])
    async with app.run_test(size=SIZE) as pilot:
        log.push(batch(T0, metric(1, **{"train/loss": 1.0}), path="/s/command.log"))
        await until(pilot, lambda: has_row(app, "/s/command.log"))
        assert cell(app, "/s/command.log", "task") == "command"
        gpus.push(
            tick(
                gpu(0, gpu_util_pct=12.0, processes=()),
                gpu(1, gpu_util_pct=99.0, processes=(GpuProcess(777, 1 << 30),)),
                t=T0 + 1,
            )
        )
        await until(pilot, lambda: app.state.gpu_tick is not None)
        await pilot.pause(0.4)
        assert cell(app, "/s/command.log", "gpu") == ("1 99%" if owner else "")
        gpus.finish()
        log.finish()


async def test_a_bad_metrics_line_met_while_replaying_is_named_and_skipped(tmp_path: Path) -> None:
    import shutil

    session = shutil.copytree(TASKS_SESSION, tmp_path / "s")
    lines = (session / "metrics.csv").read_text().splitlines(keepends=True)
    last_step = max(int(line.split(",")[5]) for line in lines[1:] if ",command," in line)
    lines[40] = "1764130020.00,command,21,train/loss,garbage,200,1\n"
    (session / "metrics.csv").write_text("".join(lines))
    replay = SessionReplay(session, speed=1e6)  # streamed: the bad line is met while replaying
    app = make_app(
        replay.collectors(), clock=lambda: T0, hostname="box", replay_label="REPLAY test"
    )
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await collectors_done(pilot, app)
        await until(pilot, lambda: bool(events(messages, Failed)))
        failed = events(messages, Failed)
        assert [f.error.msg for f in failed] == [
            f"{session}/metrics.csv:41: skipped: value: 'garbage' is not a number"
        ]
        await until(pilot, lambda: has_row(app, "command"))
        # The rows after the skipped one are shown too: the replay went on to the end.
        await until(
            pilot, lambda: cell(app, "command", "progress").startswith(f"step {last_step} ")
        )
        assert not app.screen.query_one("#tasks").has_class("-error")


async def test_a_looping_replay_starts_its_tasks_over_on_each_lap() -> None:
    replay = SessionReplay(TASKS_SESSION, speed=100.0, loop=True)
    app = make_app(replay.collectors(), clock=lambda: T0, hostname="box", replay_label="DEMO x100")
    steps: list[int] = []

    def seen_a_second_lap() -> bool:
        view = app.state.tasks.view("command")
        if view is not None and view.step is not None:
            steps.append(view.step)
        return any(a > b for a, b in zip(steps, steps[1:], strict=False))

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, seen_a_second_lap, timeout_s=20)
        view = app.state.tasks.view("command")
        assert view is not None and view.runs == 1
        xs = [x for x, _ in app.state.tasks.series("command", "train/loss")]
        assert xs == sorted(xs) and len(xs) == len(set(xs))  # this lap's points only


def test_columns_are_as_wide_as_their_content_and_an_empty_health_goes_first() -> None:
    from tui.widgets.tasks_panel import fitting_columns

    needs = {
        "task": 14,
        "status": 7,
        "progress": 15,
        "loss": 6,
        "val": 10,
        "speed": 9,
        "eta": 3,
        "gpu": 5,
        "health": 0,
    }
    keys = [key for key, _ in fitting_columns(156, needs)]
    assert keys == ["task", "status", "progress", "loss", "val", "speed", "eta", "gpu", "health"]
    narrow = dict(fitting_columns(76, needs))  # an 80-column terminal, nothing to report
    assert list(narrow) == ["task", "status", "progress", "loss", "val", "speed"]
    found = dict(fitting_columns(76, {**needs, "health": 5}))  # a NaN badge: health stays
    assert list(found) == ["task", "status", "progress", "loss", "val", "health"]
    tiny = [key for key, _ in fitting_columns(40, needs)]
    assert tiny == ["task", "status", "loss"]


async def test_a_log_source_that_cannot_start_says_why_on_its_row() -> None:
    from collectors.base import CollectorUnavailable

    log = FakeCollector(
        name=f"log:{LOG}",
        role="log",
        task_id=LOG,
        unavailable=CollectorUnavailable("inotify is not available here"),
    )
    app = make_app([log], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        await until(pilot, lambda: has_row(app, LOG))
        assert cell(app, LOG, "status") == "error"
        assert "inotify is not available" in cell(app, LOG, "health")

"""The queue panel over a real queue database, read by the real queue collector."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from gpuherd.queue.jobs import JobState
from gpuherd.queue.store import QueueStore
from gpuherd.queue.watch import QueueWatch
from tests.app.helpers import T0, UUID0, UUID1, gpu_source, host, host_source, tick, until
from tests.queue_helpers import Gpu, Queue, mark_spec
from tui.app import make_app
from tui.widgets.queue_panel import QueuePanel, QueueSection

GiB = 1 << 30
WHY = "GPU 0: 12.1 GiB free for 4 s of 10 s; needs 20 GiB + 1 GiB margin"
"""The issue's example of a wait reason, stored as the runner stores one."""
COLUMNS = ("job", "name", "state", "gpu", "need", "peak", "exit", "why")


def cells(panel: QueuePanel, job_id: int) -> dict[str, str]:
    return dict(zip(COLUMNS, (text.plain for text in panel.get_row(str(job_id))), strict=True))


def fill(state: Path, cwd: Path) -> dict[str, int]:
    """One job in each state, through the store's own transitions."""
    store = QueueStore.open(state)
    try:
        ids: dict[str, int] = {}
        for name in (
            "done",
            "failed",
            "cancelled",
            "launching",
            "running",
            "waiting",
            "second-waiting",
        ):
            spec = mark_spec(name, cwd, 20 if name != "failed" else 6.5)
            ids[name] = store.add(type(spec)(**{**_fields(spec), "name": name})).id
        for name, index, uuid in (
            ("done", 0, UUID0),
            ("failed", 1, UUID1),
            ("launching", 1, UUID1),
            ("running", 0, UUID0),
        ):
            assert store.mark_launching(ids[name], [uuid], [index], str(cwd / name))
        for name, started in (("done", T0 - 60), ("failed", T0 - 30), ("running", T0 - 125)):
            # this test process stands in for the live supervisors (pid and start time)
            assert store.mark_running(
                ids[name], os.getpid(), psutil.Process().create_time(), started
            )
        assert store.mark_ended(ids["done"], JobState.DONE, 0, T0, int(19.5 * GiB))
        assert store.mark_ended(ids["failed"], JobState.FAILED, 1, T0 - 25, 3 * GiB)
        store.request_cancel(ids["cancelled"])
        store.set_wait_reason(ids["waiting"], WHY)
        store.set_wait_reason(ids["second-waiting"], "after job 6 (waiting)")
        return ids
    finally:
        store.close()


def _fields(spec: object) -> dict[str, object]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}  # type: ignore[attr-defined]


async def test_every_state_shows_with_its_gpu_peak_time_and_reason(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ids = fill(state, tmp_path)
    watch = QueueWatch(state, interval_s=0.05, clock=lambda: T0)
    app = make_app([watch], clock=lambda: T0)
    async with app.run_test(size=(180, 50)) as pilot:
        panel = app.screen.query_one(QueuePanel)
        await until(pilot, lambda: panel.row_count == 7)
        assert app.screen.query_one("#queue").has_class("-shown")
        await pilot.pause(0.2)
        assert app.screen.query_one("#queue").region.height == 10  # borders, header, 7 jobs
        assert cells(panel, ids["done"]) == {
            "job": str(ids["done"]),
            "name": "done",
            "state": "done",
            "gpu": "0",
            "need": "20 GiB",
            "peak": "19.5 GiB",
            "exit": "0 · 1:00",
            "why": "-",
        }
        assert cells(panel, ids["failed"]) == {
            "job": str(ids["failed"]),
            "name": "failed",
            "state": "failed",
            "gpu": "1",
            "need": "6.5 GiB",
            "peak": "3 GiB",
            "exit": "1 · 0:05",
            "why": "-",
        }
        assert cells(panel, ids["cancelled"])["state"] == "cancelled"
        assert cells(panel, ids["cancelled"])["gpu"] == "-"
        assert cells(panel, ids["launching"])["state"] == "launching"
        assert cells(panel, ids["launching"])["gpu"] == "1"
        assert cells(panel, ids["launching"])["exit"] == "-"
        running = cells(panel, ids["running"])
        assert (running["state"], running["gpu"], running["peak"], running["exit"]) == (
            "running",
            "0",
            "-",
            "2:05",
        )
        assert cells(panel, ids["waiting"]) == {
            "job": str(ids["waiting"]),
            "name": "waiting",
            "state": "waiting",
            "gpu": "-",
            "need": "20 GiB",
            "peak": "-",
            "exit": "-",
            "why": WHY,
        }
        assert cells(panel, ids["second-waiting"])["why"] == "after job 6 (waiting)"
        # `queue ls` order: waiting jobs first, in line, then the rest by id.
        assert [row.key for row in panel.rows_shown] == [
            str(ids[n])
            for n in (
                "waiting",
                "second-waiting",
                "done",
                "failed",
                "cancelled",
                "launching",
                "running",
            )
        ]
        title = str(app.screen.query_one("#queue").border_title)
        assert title == (
            "Queue (2 waiting, 1 done, 1 failed, 1 cancelled, 1 launching, "
            "1 running) · no runner: jobs wait (gpuherd queue run, or "
            "gpuherd --queue)"
        )


async def test_the_runners_own_wait_reasons_reach_the_panel_and_its_rows_follow_the_jobs(
    tmp_path: Path,
) -> None:
    # An 80 GiB card with 22 GiB free for 4 s of a 10 s settle period: the first job (20 GiB)
    # fits but waits for the period, the second (30 GiB) does not fit at all.
    queue = Queue(tmp_path, [Gpu(UUID0, used=80 * GiB - 22 * GiB)], settle_s=10.0)
    first = queue.add(mark_spec("a", queue.cwd, 20))
    second = queue.add(mark_spec("b", queue.cwd, 30))
    queue.step(T0 - 4)
    queue.step(T0)
    watch = QueueWatch(queue.state, interval_s=0.05, clock=lambda: T0)
    app = make_app([watch], clock=lambda: T0)
    async with app.run_test(size=(180, 50)) as pilot:
        panel = app.screen.query_one(QueuePanel)
        await until(pilot, lambda: panel.row_count == 2)
        row = cells(panel, first.id)
        assert (row["state"], row["gpu"], row["need"], row["why"]) == (
            "waiting",
            "-",
            "20 GiB",
            "GPU 0: 22 GiB free for 4 s of 10 s; needs 20 GiB + 1 GiB margin",
        )
        row = cells(panel, second.id)
        assert (row["state"], row["need"], row["why"]) == (
            "waiting",
            "30 GiB",
            "GPU 0: 22 GiB free; needs 30 GiB + 1 GiB margin",
        )
        # The settle period has passed: the first job starts on GPU 0, runs and ends.
        queue.step(T0 + 7)
        queue.step_until(lambda: queue.state_of(first.id) is JobState.DONE)
        # (seen ended before the runner recorded it, the row says so until it has)
        await until(
            pilot,
            lambda: (
                cells(panel, first.id)["state"] == "done" and cells(panel, first.id)["why"] == "-"
            ),
        )
        done = cells(panel, first.id)
        assert (done["gpu"], done["exit"].split(" · ")[0], done["why"]) == ("0", "0", "-")
        assert cells(panel, second.id)["state"] == "waiting"
        assert [row.key for row in panel.rows_shown] == [str(second.id), str(first.id)]
    queue.store.close()


async def test_no_queue_database_hides_the_panel_and_looking_creates_nothing(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    watch = QueueWatch(state, interval_s=0.02)
    app = make_app([gpu_source(tick()), host_source(host()), watch], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(
            pilot,
            lambda: watch.name in app.state.status and app.state.status[watch.name].health == "ok",
        )
        await pilot.pause(0.2)
        assert not app.screen.query_one("#queue").has_class("-shown")
        assert not app.screen.query_one("#queue").display
        assert not state.exists()
        # A queue made meanwhile (`gpuherd queue add`) shows up without a restart.
        store = QueueStore.open(state)
        store.add(mark_spec("late", tmp_path, 1))
        store.close()
        await until(pilot, lambda: app.screen.query_one(QueuePanel).row_count == 1)
        assert app.screen.query_one("#queue").has_class("-shown")


async def test_a_corrupt_database_is_named_on_the_panel_and_left_as_it_is(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    junk = b"this is not SQLite" * 100
    (state / "queue.db").write_bytes(junk)
    watch = QueueWatch(state, interval_s=0.02)
    app = make_app([watch], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.screen.query_one("#queue").has_class("-error"))
        assert app.screen.query_one("#queue").has_class("-shown")
        subtitle = str(app.screen.query_one("#queue").border_subtitle)
        assert subtitle.startswith(f"{state / 'queue.db'}: cannot read the queue: ")
    assert (state / "queue.db").read_bytes() == junk
    assert sorted(p.name for p in state.iterdir()) == ["queue.db"]


async def test_a_long_runner_message_wraps_instead_of_being_cut(tmp_path: Path) -> None:
    state = tmp_path / "state"
    fill(state, tmp_path)
    said = (
        "waiting: job 7 needs 20 GiB + 1 GiB margin on 1 GPU; GPU 0 has 12.5 GiB free "
        "(another user's job holds 60 GiB), GPU 1 is 97 % busy; the next look is in 10 s, "
        "and the reservation ledger holds 8 GiB for job 3 of another user until it allocates"
    )
    watch = QueueWatch(state, interval_s=0.05, note=lambda: said, clock=lambda: T0)
    app = make_app([watch], clock=lambda: T0)
    async with app.run_test(size=(120, 50)) as pilot:
        note = app.screen.query_one("#queue-note")
        await until(pilot, lambda: note.display and note.size.height > 0)
        assert note.size.height >= 2  # 260 characters on a 120-column screen
        # the panel counts the note's lines as drawn; with the borders, the header and seven
        # jobs they pass its 12 lines, so the table gives way to the note, not the note to it
        section = app.screen.query_one(QueueSection)
        assert section.body_lines() == 1 + 7 + note.size.height
        await until(pilot, lambda: section.region.height == 12)
        assert app.screen.query_one(QueuePanel).size.height + note.size.height == 10
        lines = [strip.text for strip in note.render_lines(note.region.reset_offset)]
        assert " ".join(line.strip() for line in lines).endswith("until it allocates")


async def test_a_look_that_found_the_same_waiting_queue_redraws_nothing(tmp_path: Path) -> None:
    # The queue is looked at every second; with no job under way nothing on the panel moves
    # with the clock, so only a look that found another queue redraws the table.
    state = tmp_path / "state"
    store = QueueStore.open(state)
    store.add(mark_spec("a", tmp_path, 2))
    store.close()
    now = [T0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    watch = QueueWatch(state, interval_s=0.02, clock=clock)
    app = make_app([watch], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        section = app.screen.query_one(QueueSection)
        await until(pilot, lambda: app.screen.query_one(QueuePanel).row_count == 1)
        seen = now[0]
        await until(pilot, lambda: now[0] >= seen + 5)  # five more looks, a second apart
        assert section.draws == 1
        store = QueueStore.open(state)
        store.add(mark_spec("b", tmp_path, 1))
        store.close()
        await until(pilot, lambda: app.screen.query_one(QueuePanel).row_count == 2)
        assert section.draws == 2

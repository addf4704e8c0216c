"""A task's status follows its writer: running while lines come, stalled, finished."""

from __future__ import annotations

import pytest

from gpuherd.tasks import TaskTracker
from gpuherd.tasks.line_clock import STALL_FACTOR, STALL_FLOOR_S
from tests.unit.test_tasks import TASK, batch, metric

PID = 4242


def lines_at(tracker: TaskTracker, *times: float) -> None:
    """One new line at each time, read as it was written (the tail is caught up)."""
    for i, t in enumerate(times):
        tracker.add_batch(
            batch(
                t,
                [metric(step=i + 1, train__loss=1.0)],
                modified_at=t,
                offset_bytes=100 * (i + 1),
                size_bytes=100 * (i + 1),
            )
        )


def status_at(tracker: TaskTracker, t: float, pids: tuple[int, ...] = (PID,)) -> str:
    tracker.writers_seen(TASK, t, pids, pids)
    view = tracker.view(TASK)
    assert view is not None
    return view.status


def test_the_usual_interval_is_the_median_gap_and_stalled_comes_after_five_of_them() -> None:
    tracker = TaskTracker()
    lines_at(tracker, 0.0, 20.0, 40.0, 60.0, 100.0)  # gaps 20, 20, 20, 40: median 20
    assert tracker.usual_interval_s(TASK) == 20.0
    assert tracker.stall_after_s(TASK) == STALL_FACTOR * 20.0 == 100.0
    assert status_at(tracker, 200.0) == "running"  # exactly 100 s of silence
    assert status_at(tracker, 200.5) == "stalled"
    view = tracker.view(TASK)
    assert view is not None and view.stall_after_s == 100.0 and not view.running


def test_a_fast_log_stalls_after_the_floor_not_after_five_of_its_intervals() -> None:
    tracker = TaskTracker()
    lines_at(tracker, *[float(t) for t in range(10)])  # one line a second
    assert tracker.stall_after_s(TASK) == STALL_FLOOR_S == 30.0
    assert status_at(tracker, 9.0 + 29.9) == "running"
    assert status_at(tracker, 9.0 + 30.1) == "stalled"


def test_a_new_line_after_a_stall_runs_again() -> None:
    tracker = TaskTracker()
    lines_at(tracker, 0.0, 1.0, 2.0)
    assert status_at(tracker, 40.0) == "stalled"
    lines_at(tracker, 41.0)
    assert status_at(tracker, 41.5) == "running"


def test_without_enough_gaps_the_running_window_applies() -> None:
    tracker = TaskTracker(active_s=60.0)
    lines_at(tracker, 0.0, 5.0)  # one gap: no usual interval yet
    assert tracker.usual_interval_s(TASK) is None
    assert status_at(tracker, 65.0) == "running"
    assert status_at(tracker, 65.5) == "stalled"


def test_a_backlog_read_in_pieces_gives_no_gaps() -> None:
    tracker = TaskTracker()
    for i in range(5):  # the tail catching up on an old log: offset below size
        tracker.add_batch(
            batch(
                float(i),
                [metric(step=i + 1, train__loss=1.0)],
                modified_at=0.0,
                offset_bytes=10 * (i + 1),
                size_bytes=1000,
            )
        )
    assert tracker.usual_interval_s(TASK) is None


def test_the_writer_gone_turns_the_task_finished_without_an_exit_code() -> None:
    tracker = TaskTracker()
    lines_at(tracker, 0.0, 1.0, 2.0)
    assert status_at(tracker, 3.0) == "running"
    assert status_at(tracker, 3.5, pids=()) == "finished"  # was "running" until 60 s passed
    view = tracker.view(TASK)
    assert view is not None and view.pids == (PID,) and view.exit_code is None
    assert status_at(tracker, 10.0, pids=(PID + 1,)) == "running"  # a rerun writes it again


@pytest.mark.parametrize(("code", "status"), [(0, "done"), (143, "stopped"), (1, "failed")])
def test_an_exit_code_from_the_command_gpuherd_started_wins(code: int, status: str) -> None:
    tracker = TaskTracker()
    lines_at(tracker, 0.0, 1.0, 2.0)
    tracker.ended(TASK, code)
    assert status_at(tracker, 3.0, pids=()) == status


def test_a_dead_writer_after_a_traceback_is_failed() -> None:
    from parsers.model import LogFinding

    tracker = TaskTracker()
    lines_at(tracker, 0.0, 1.0)
    tracker.add_batch(
        batch(
            2.0,
            (),
            [(3, LogFinding("traceback", "Traceback (most recent call"))],
            lines=1,
            modified_at=2.0,
            offset_bytes=300,
            size_bytes=300,
        )
    )
    assert status_at(tracker, 2.5) == "running"
    assert status_at(tracker, 3.0, pids=()) == "failed"


def test_no_writer_known_keeps_the_old_rules() -> None:
    tracker = TaskTracker(active_s=60.0)
    lines_at(tracker, 0.0, 1.0, 2.0)
    tracker.writers_seen(TASK, 62.0, ())  # nobody found holding it: nothing changes
    view = tracker.view(TASK)
    assert view is not None and view.status == "running" and view.pids == ()
    tracker.writers_seen(TASK, 62.5, ())
    assert tracker.view(TASK).status == "idle"  # type: ignore[union-attr]


def test_the_exporter_beside_the_dashboard_shows_the_same_statuses() -> None:
    from collectors.base import Sampled
    from collectors.machine.writers import LogWriters, WritersTick
    from gpuherd.export.families import STATUSES
    from gpuherd.export.state import ExportState

    state = ExportState("box")
    for i, t in enumerate((0.0, 1.0, 2.0)):
        state.emit(
            Sampled(
                "log:a",
                batch(
                    t,
                    [metric(step=i + 1, train__loss=1.0)],
                    modified_at=t,
                    offset_bytes=10 * (i + 1),
                    size_bytes=10 * (i + 1),
                ),
            )
        )
    state.emit(Sampled("writers", WritersTick(2.5, (LogWriters(TASK, (PID,), (PID,)),))))
    assert [v.status for v in state.snapshot().tasks] == ["running"]
    state.emit(Sampled("writers", WritersTick(3.0, (LogWriters(TASK, (), ()),))))
    assert [v.status for v in state.snapshot().tasks] == ["finished"]
    assert {"stalled", "finished", "done", "stopped"} <= set(STATUSES)


def test_a_log_that_ends_in_an_oom_and_goes_quiet_with_no_writer_seen_has_failed() -> None:
    # The short-lived writer was never seen: the OOM and the silence after it say it ended.
    from gpuherd.tasks.tracker import ERROR_QUIET_S
    from parsers.model import LogFinding

    tracker = TaskTracker(active_s=60.0)
    lines_at(tracker, 0.0, 1.0)
    oom = LogFinding("oom", "torch.OutOfMemoryError: CUDA out of memory.")
    tracker.add_batch(
        batch(2.0, (), [(3, oom)], lines=1, modified_at=2.0, offset_bytes=300, size_bytes=300)
    )
    tracker.writers_seen(TASK, 2.0 + ERROR_QUIET_S - 0.1, ())
    assert tracker.view(TASK).status == "running"  # type: ignore[union-attr]  # still writing?
    tracker.writers_seen(TASK, 2.0 + ERROR_QUIET_S, ())
    assert tracker.view(TASK).status == "failed"  # type: ignore[union-attr]
    # a metric after the error: the run went on, and it runs again
    lines_at(tracker, 8.0)
    assert tracker.view(TASK).status == "running"  # type: ignore[union-attr]


def test_an_error_with_a_live_writer_known_is_not_failed_while_it_writes() -> None:
    from parsers.model import LogFinding

    tracker = TaskTracker(active_s=60.0)
    lines_at(tracker, 0.0, 1.0)
    tracker.add_batch(
        batch(
            2.0,
            (),
            [(3, LogFinding("traceback", "Traceback (most recent"))],
            lines=1,
            modified_at=2.0,
            offset_bytes=300,
            size_bytes=300,
        )
    )
    assert status_at(tracker, 30.0) == "running"  # caught and logged; the writer lives on


def test_a_slow_log_after_an_error_gets_five_of_its_intervals_before_it_has_failed() -> None:
    from parsers.model import LogFinding

    tracker = TaskTracker(active_s=600.0)
    lines_at(tracker, 0.0, 20.0, 40.0, 60.0)  # a line every 20 s
    tracker.add_batch(
        batch(
            61.0,
            (),
            [(5, LogFinding("traceback", "Traceback (most recent"))],
            lines=1,
            modified_at=61.0,
            offset_bytes=500,
            size_bytes=500,
        )
    )
    tracker.writers_seen(TASK, 61.0 + 99.0, ())
    assert tracker.view(TASK).status == "running"  # type: ignore[union-attr]
    tracker.writers_seen(TASK, 61.0 + 100.0, ())
    assert tracker.view(TASK).status == "failed"  # type: ignore[union-attr]

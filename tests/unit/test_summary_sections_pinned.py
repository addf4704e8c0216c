"""The session, findings and lifecycle sections of a summary, exactly, key by key.

Cases found by mutation testing (benchmarks/mutation.py) that the other summary tests let
through: which exit event gives the exit code, the duration of an unfinished session, which
lifecycle events are listed and in what shape, the cut-offs of the listed findings and their
evidence, and findings without a task or a kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuherd.summary.report import fmt_duration, render_short
from gpuherd.summary.summary import MAX_LISTED_FINDINGS, summarize
from tests.unit.test_summary import GIB, T0, gpu_row, write_session

LONG = "x" * 299 + "yz"
"""301 characters: the evidence kept per kind is its first 300."""


def findings() -> list[dict]:
    out = [
        {
            "t": T0 + 2,
            "kind": "finding",
            "task": "train",
            "line": 3,
            "finding": "nan",
            "evidence": LONG,
        },
        {
            "t": T0 + 3,
            "kind": "finding",
            "task": "eval",
            "line": 9,
            "finding": "oom",
            "evidence": "CUDA out of memory",
        },
        {"t": T0 + 4, "kind": "finding", "line": 11, "finding": "stalled"},  # no task
        {
            "t": T0 + 5,
            "kind": "finding",
            "task": "train",
            "line": 12,
            "finding": "nan",
            "evidence": "second",
        },
    ]
    out += [
        {
            "t": T0 + 6 + i / 100,
            "kind": "finding",
            "task": "eval",
            "line": 20 + i,
            "finding": "oom",
            "evidence": f"again {i}",
        }
        for i in range(MAX_LISTED_FINDINGS)
    ]
    return out


def test_findings_are_counted_per_task_and_kind_and_the_first_fifty_listed(tmp_path: Path) -> None:
    root = write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], events=findings())
    found = summarize(root).data["findings"]
    assert found["total"] == 4 + MAX_LISTED_FINDINGS
    assert found["by_kind"] == [
        {
            "task": "train",
            "finding": "nan",
            "count": 2,
            "first_line": 3,
            "first_t": T0 + 2,
            "evidence": "x" * 299 + "y",
        },
        {
            "task": "eval",
            "finding": "oom",
            "count": 1 + MAX_LISTED_FINDINGS,
            "first_line": 9,
            "first_t": T0 + 3,
            "evidence": "CUDA out of memory",
        },
        {
            "task": "",
            "finding": "stalled",
            "count": 1,
            "first_line": 11,
            "first_t": T0 + 4,
            "evidence": "",
        },
    ]
    listed = found["listed"]
    assert len(listed) == MAX_LISTED_FINDINGS == 50
    assert listed[0] == {
        "t": T0 + 2,
        "task": "train",
        "line": 3,
        "finding": "nan",
        "evidence": LONG,
    }  # the list keeps the whole evidence
    assert listed[2] == {
        "t": T0 + 4,
        "task": None,
        "line": 11,
        "finding": "stalled",
        "evidence": None,
    }
    assert [e["line"] for e in listed[-2:]] == [64, 65]  # the 50th finding, not the 54th
    assert [list(e) for e in listed[:1]] == [["t", "task", "line", "finding", "evidence"]]


def test_findings_are_not_lifecycle_events_and_other_events_are_not_findings(
    tmp_path: Path,
) -> None:
    events = [
        {"t": T0 + 1, "kind": "log_found", "path": "/runs/a.log"},
        {"t": T0 + 2, "kind": "finding", "task": "a", "finding": "nan", "line": 1},
    ]
    data = summarize(
        write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], events=events)
    ).data
    assert data["findings"]["total"] == 1
    assert data["events"] == {"counts": {"log_found": 1}, "notable": []}


NOTABLE = [
    "collector_failed",
    "collector_unavailable",
    "disk_full",
    "signal",
    "write_failed",
    "log_dropped",
]


def test_lifecycle_counts_every_kind_and_lists_the_ones_a_verification_needs(
    tmp_path: Path,
) -> None:
    events = [
        {"t": T0 + 1, "kind": "log_found", "path": "/runs/a.log"},
        {"t": T0 + 1.5, "kind": "finding", "task": "a", "finding": "oom", "line": 1},
        {"t": T0 + 2, "kind": "collector_failed", "collector": "nvml", "error": "gone"},
        {"t": T0 + 3, "kind": "collector_recovered", "collector": "nvml"},
        {
            "t": T0 + 4,
            "kind": "collector_unavailable",
            "collector": "docker",
            "reason": "no engine",
        },
        {"t": T0 + 5, "kind": "disk_full", "path": "gpu.csv"},
        {"t": T0 + 6, "kind": "signal", "signal": 15},
        {"t": T0 + 7, "kind": "write_failed", "path": "host.csv", "error": "EIO"},
        {"t": T0 + 8, "kind": "log_dropped", "path": "/runs/b.log"},
        {"t": T0 + 9, "kind": "collector_failed", "collector": "psutil"},
        {"t": T0 + 10, "kind": "finding", "task": "a", "finding": "nan", "line": 2},
    ]
    data = summarize(
        write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], events=events)
    ).data
    assert data["events"]["counts"] == {
        "log_found": 1,
        "collector_failed": 2,
        "collector_recovered": 1,
        "collector_unavailable": 1,
        "disk_full": 1,
        "signal": 1,
        "write_failed": 1,
        "log_dropped": 1,
    }
    notable = data["events"]["notable"]
    assert notable == [
        {"kind": "collector_failed", "collector": "nvml", "error": "gone", "t": T0 + 2},
        {
            "kind": "collector_unavailable",
            "collector": "docker",
            "reason": "no engine",
            "t": T0 + 4,
        },
        {"kind": "disk_full", "path": "gpu.csv", "t": T0 + 5},
        {"kind": "signal", "signal": 15, "t": T0 + 6},
        {"kind": "write_failed", "path": "host.csv", "error": "EIO", "t": T0 + 7},
        {"kind": "log_dropped", "path": "/runs/b.log", "t": T0 + 8},
        {"kind": "collector_failed", "collector": "psutil", "t": T0 + 9},
    ]
    # the time moves to the end of each entry, after what happened
    assert [list(e)[-1] for e in notable] == ["t"] * len(notable)
    assert list(notable[0]) == ["kind", "collector", "error", "t"]


@pytest.mark.parametrize("kind", NOTABLE)
def test_the_notable_list_stops_at_fifty(tmp_path: Path, kind: str) -> None:
    events = [{"t": T0 + i, "kind": kind, "n": i} for i in range(MAX_LISTED_FINDINGS + 3)]
    data = summarize(
        write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], events=events)
    ).data
    assert data["events"]["counts"] == {kind: MAX_LISTED_FINDINGS + 3}
    notable = data["events"]["notable"]
    assert [e["n"] for e in notable] == list(range(MAX_LISTED_FINDINGS))


PEAK = {
    "gpu": 0,
    "uuid": "GPU-aaaa",
    "peak_bytes": 3 * GIB,
    "at": T0 + 4,
    "method": "nvml",
    "baseline_bytes": GIB,
}


def test_the_session_section_of_a_finished_command(tmp_path: Path) -> None:
    # no exit code in meta.json: the last exit event's, not the first's
    events = [
        {"t": T0 + 2, "kind": "start", "pid": 1},
        {"t": T0 + 8, "kind": "exit", "exit_code": 3},
        {"t": T0 + 9, "kind": "exit", "exit_code": 137},
    ]
    meta = {
        "tool": "gpuherd 1.4.0",
        "ended_at": T0 + 12.34567,
        "interval_s": 0.5,
        "peak_interval_s": 0.02,
        "command": ["python", "train.py"],
        "run_peaks": [PEAK],
    }
    root = write_session(
        tmp_path / "s",
        gpu_rows=[gpu_row(T0 + i, 0, GIB, 5) for i in range(4)],
        events=events,
        meta=meta,
    )
    assert summarize(root).data["session"] == {
        "directory": str(root),
        "host": "box-7",
        "tool": "gpuherd 1.4.0",
        "driver": "580.159.04",
        "started_at": T0,
        "ended_at": T0 + 12.34567,
        "complete": True,
        "duration_s": 12.346,
        "interval_s": 0.5,
        "peak_interval_s": 0.02,
        "command": ["python", "train.py"],
        "exit_code": 137,
        "stopped_at_duration": False,
        "run_peaks": [PEAK],
        "readings": 4,
    }


@pytest.mark.parametrize(
    ("ended", "duration"),
    [
        (T0 - 0.001, None),  # just before the start: invalid, never negative
        (T0, 0.0),
        (T0 + 0.001, 0.001),
    ],
)
def test_an_end_before_the_start_gives_no_duration_and_a_note(
    tmp_path: Path, ended, duration
) -> None:
    # The rows end before the start too, so the duration cannot come from them either.
    rows = [gpu_row(T0 - 5 + i, 0, GIB, 5) for i in range(3)]
    summary = summarize(write_session(tmp_path / "s", gpu_rows=rows, meta={"ended_at": ended}))
    session = summary.data["session"]
    assert session["duration_s"] == duration
    notes = [w for w in summary.data["warnings"] if "ended_at" in w]
    if duration is None:
        assert session["ended_at"] is None and len(notes) == 1
        assert notes[0].endswith(
            "ignored 'ended_at': 1764129999.999 is 0.001 s before 'started_at' (1764130000.000)"
        )
        assert render_short(summary).splitlines()[0] == f"session {tmp_path / 's'}: -"
    else:
        assert session["ended_at"] == ended and not notes


def test_an_exit_code_in_meta_wins_over_the_exit_events(tmp_path: Path) -> None:
    events = [{"t": T0 + 2, "kind": "start"}, {"t": T0 + 3, "kind": "exit", "exit_code": 1}]
    root = write_session(
        tmp_path / "s",
        gpu_rows=[gpu_row(T0, 0, GIB, 5)],
        events=events,
        meta={"command": ["true"], "exit_code": 0},
    )
    assert summarize(root).data["session"]["exit_code"] == 0


def test_an_unfinished_session_lasts_until_its_window_ends(tmp_path: Path) -> None:
    # no ended_at (the recorder was killed): the duration runs to the last GPU row
    rows = [gpu_row(T0 + 0.25 + i, 0, GIB, 5) for i in range(5)]
    session = summarize(write_session(tmp_path / "s", gpu_rows=rows, meta={"ended_at": None})).data[
        "session"
    ]
    assert (session["ended_at"], session["complete"], session["duration_s"]) == (None, False, 4.25)
    assert (
        session["tool"],
        session["interval_s"],
        session["peak_interval_s"],
        session["command"],
        session["exit_code"],
        session["run_peaks"],
    ) == (None, 1.0, None, None, None, [])
    # an exit event with no exit code in it leaves the code unknown
    root = write_session(tmp_path / "t", gpu_rows=rows, events=[{"t": T0 + 1, "kind": "exit"}])
    assert summarize(root).data["session"]["exit_code"] is None


def test_the_commands_window_runs_from_its_first_start_to_its_last_exit(tmp_path: Path) -> None:
    # other events before the start and after the exit do not stretch the window
    events = [
        {"t": T0 + 1, "kind": "log_found", "path": "/runs/a.log"},
        {"t": T0 + 3, "kind": "start", "pid": 1},
        {"t": T0 + 4, "kind": "start", "pid": 2},
        {"t": T0 + 6, "kind": "exit", "exit_code": 0},
        {"t": T0 + 8, "kind": "exit", "exit_code": 0},
        {"t": T0 + 9, "kind": "finding", "task": "a", "finding": "nan", "line": 1},
    ]
    rows = [gpu_row(T0 + i, 0, GIB, 5) for i in range(11)]
    root = write_session(
        tmp_path / "s", gpu_rows=rows, events=events, meta={"command": ["python", "train.py"]}
    )
    assert summarize(root).data["window"] == {"start": T0 + 3, "end": T0 + 8, "source": "command"}


@pytest.mark.parametrize(
    ("meta", "events", "source"),
    [
        ({"command": ["python", "train.py"]}, [], "session"),  # the command never started
        ({}, [{"t": T0 + 3, "kind": "start", "pid": 1}], "session"),  # no command recorded
    ],
)
def test_a_window_needs_both_a_command_and_its_start(
    tmp_path: Path, meta: dict, events: list[dict], source: str
) -> None:
    rows = [gpu_row(T0 + 2 + i, 0, GIB, 5) for i in range(5)]
    root = write_session(tmp_path / "s", gpu_rows=rows, events=events, meta=meta)
    # the session's window: its GPU rows, which began 2 s after the recording did
    assert summarize(root).data["window"] == {"start": T0 + 2, "end": T0 + 6, "source": source}


def test_without_gpu_rows_the_window_is_the_recordings_start_and_end(tmp_path: Path) -> None:
    root = write_session(tmp_path / "s", gpu_rows=[], meta={"ended_at": T0 + 20})
    data = summarize(root).data
    assert data["window"] == {"start": T0, "end": T0 + 20, "source": "session"}
    assert data["session"]["duration_s"] == 20


@pytest.mark.parametrize(
    ("seconds", "shown"), [(-0.001, "-"), (0.0, "0.0s"), (float("nan"), "-"), (61, "1m 01s")]
)
def test_a_duration_is_never_shown_negative(seconds, shown) -> None:
    assert fmt_duration(seconds) == shown


def test_a_finding_event_without_its_kind_is_no_finding(tmp_path: Path) -> None:
    events = [
        {"t": T0 + 1, "kind": "finding", "task": "a.log", "line": 3},
        {"t": T0 + 2, "kind": "finding", "task": "a.log", "line": 4, "finding": ""},
        {"t": T0 + 3, "kind": "finding", "task": "a.log", "line": 5, "finding": "oom"},
    ]
    data = summarize(
        write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)], events=events)
    ).data
    assert [(f["finding"], f["count"]) for f in data["findings"]["by_kind"]] == [("oom", 1)]
    assert data["findings"]["total"] == 1
    assert any(
        "skipped 2 lines" in w and "'finding' must name its kind" in w for w in data["warnings"]
    )

"""The session reader's numbers pinned: the replay's time span, its end after a damaged tail.

`SessionReader.time_span()` sets the replay's clock (its first sample, and one lap's length when
looping) and the end up to which the containers' "none ran" tick is given. Its end comes from
the tail of `gpu.csv` and `host.csv` without reading them through, so each way a recording can
end badly (a row cut inside its last cell, a garbage row, a blank line, a last row too long for
the tail that is read first) must still give the `t` of the last row the reader keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.session.rows import SessionFormatError
from collectors.session.session_format import (
    CONTAINER_COLUMNS,
    HOST_WRITTEN,
    METRICS_COLUMNS,
    SCHEMA_VERSION,
)
from collectors.session.session_reader import SessionReader
from tests.unit.test_summary import GPU_HEADER, T0, gpu_row

STARTED = T0 - 7.0
CUT = "dropped the last line, cut short (no newline at the end)"


def write(
    root: Path,
    gpu: list[str],
    *,
    host: list[float] | None = None,
    metrics: list[float] | None = None,
    containers: list[float] | None = None,
    gpu_tail: bytes = b"",
) -> Path:
    """A session directory: `gpu` rows as given, the other files with one row per `t`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.json").write_text(
        json.dumps(
            {
                "schema": SCHEMA_VERSION,
                "host": "box",
                "driver": "580.159.04",
                "started_at": STARTED,
                "interval_s": 1.0,
            }
        )
    )
    (root / "gpu.csv").write_bytes(
        "".join(line + "\n" for line in [GPU_HEADER, *gpu]).encode() + gpu_tail
    )
    if host is not None:
        (root / "host.csv").write_text(
            "".join(
                f"{line}\n"
                for line in [
                    ",".join(HOST_WRITTEN),
                    *(f"{t},10,{1 << 30},{64 << 30}" for t in host),
                ]
            )
        )
    if metrics is not None:
        (root / "metrics.csv").write_text(
            "".join(
                f"{line}\n"
                for line in [
                    ",".join(METRICS_COLUMNS),
                    *(f"{t},command,1,train/loss,0.5,1,0" for t in metrics),
                ]
            )
        )
    if containers is not None:
        blank = "," * (len(CONTAINER_COLUMNS) - 5)
        (root / "containers.csv").write_text(
            "".join(
                f"{line}\n"
                for line in [
                    ",".join(CONTAINER_COLUMNS),
                    *(f"{t},{'a' * 64},trainer,busybox,running{blank}" for t in containers),
                ]
            )
        )
    return root


def rows(*offsets: float, gpus: int = 1) -> list[str]:
    return [gpu_row(T0 + s, g, 1 << 30, 50) for s in offsets for g in range(gpus)]


@pytest.mark.parametrize(
    ("gpu", "host", "span"),
    [
        ((0, 1, 2, 3), (0.5, 1.5, 4.5), (T0, T0 + 4.5)),  # host both starts and ends later
        ((1, 2, 3), (-0.5, 0.5, 1.5), (T0 - 0.5, T0 + 3)),  # host both starts and ends earlier
    ],
)
def test_the_span_runs_from_the_earliest_first_row_to_the_latest_last_row(
    tmp_path: Path, gpu: tuple[float, ...], host: tuple[float, ...], span: tuple[float, float]
) -> None:
    # metrics.csv and containers.csv go on later: they do not lengthen the span
    root = write(
        tmp_path / "s",
        rows(*gpu, gpus=2),
        host=[T0 + s for s in host],
        metrics=[T0 + 9],
        containers=[T0 + 8],
    )
    reader = SessionReader(root)
    assert reader.last_t == {
        "gpu.csv": T0 + gpu[-1],
        "host.csv": T0 + host[-1],
        "metrics.csv": T0 + 9,
        "containers.csv": T0 + 8,
    }
    assert reader.time_span() == span
    assert reader.warnings == []


def test_a_session_without_rows_spans_its_start_alone(tmp_path: Path) -> None:
    reader = SessionReader(write(tmp_path / "s", [], host=[]))
    assert reader.last_t == {"gpu.csv": None, "host.csv": None}
    assert reader.time_span() == (STARTED, STARTED)


def test_a_session_with_host_rows_only_spans_them(tmp_path: Path) -> None:
    reader = SessionReader(write(tmp_path / "s", [], host=[T0 + 2, T0 + 5]))
    assert reader.time_span() == (T0 + 2, T0 + 5)


BAD_NAME = "NVIDIA\rH200"  # a carriage return in an unquoted cell: the csv module refuses it
DAMAGED_TAILS = {
    # how the file ends: (extra bytes after the rows at T0 .. T0+3, the span's end, notes)
    "complete": (b"", T0 + 3, []),
    "row_cut_inside_its_last_cell": (gpu_row(T0 + 4, 0, 1 << 30, 50).encode()[:-3], T0 + 3, [CUT]),
    "row_cut_inside_its_t": (f"{T0 + 4}"[:-3].encode(), T0 + 3, [CUT]),
    "blank_line_at_the_end": (b"\n", T0 + 3, []),
    "row_with_too_few_cells": (
        f"{T0 + 4},0\n".encode(),
        T0 + 3,
        ["skipped 1 line that could not be read (first: line 6: 2 cells where the header has 11)"],
    ),
    "row_with_a_garbage_t": (
        gpu_row(T0 + 4, 0, 1 << 30, 50).replace(f"{T0 + 4}", "oops", 1).encode() + b"\n",
        T0 + 3,
        ["skipped 1 line that could not be read (first: line 6: t: 'oops' is not a number)"],
    ),
    "row_the_csv_module_refuses": (
        gpu_row(T0 + 4, 0, 1 << 30, 50).replace("NVIDIA H200", BAD_NAME).encode() + b"\n",
        T0 + 3,
        [
            "skipped 1 line that could not be read (first: line 6: a carriage return inside a "
            "cell that is not quoted)"
        ],
    ),
    "row_with_invalid_utf8_kept": (
        gpu_row(T0 + 4, 0, 1 << 30, 50)
        .replace("NVIDIA H200", "NVIDIA \udcff\udcfe")
        .encode("utf-8", "surrogateescape")
        + b"\n",
        T0 + 4,
        [],
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED_TAILS))
def test_the_span_ends_at_the_last_row_the_reader_keeps(tmp_path: Path, case: str) -> None:
    tail, end, notes = DAMAGED_TAILS[case]
    root = write(tmp_path / "s", rows(0, 1, 2, 3), gpu_tail=tail)
    reader = SessionReader(root)
    assert reader.time_span() == (T0, end)
    assert [t.taken_at for t in reader.gpu_ticks()][-1] == end
    assert reader.warnings == [f"{root}/gpu.csv: {n}" for n in notes]


def big_row(t: float, name_bytes: int) -> str:
    return gpu_row(t, 0, 1 << 30, 50).replace("NVIDIA H200", "N" * name_bytes)


@pytest.mark.parametrize(
    ("last_names", "end"),
    [
        # Only the end of the file is read at first (64 KiB): the row at T0+5 starts outside it
        # and the one at T0+6 inside it.
        ((40_000, 40_000), T0 + 6),
        # The tail of a last row (T0+6, 100 KB) is all the first 64 KiB hold.
        ((10, 100_000), T0 + 6),
        # A garbage tail longer than 64 KiB: the row before it ends the session.
        ((10, 10), T0 + 5),
    ],
)
def test_the_span_ends_at_the_last_valid_row_however_far_back(
    tmp_path: Path, last_names: tuple[int, int], end: float
) -> None:
    gpu = [*rows(0, 1, 2, 3, 4), big_row(T0 + 5, last_names[0]), big_row(T0 + 6, last_names[1])]
    garbage = b"x" * 70_000 + b"\n" if end == T0 + 5 else b""
    if garbage:
        gpu.pop()  # the garbage line takes the place of the last row
    root = write(tmp_path / "s", gpu, gpu_tail=garbage)
    assert (root / "gpu.csv").stat().st_size > 1 << 16
    reader = SessionReader(root)
    assert reader.last_t["gpu.csv"] == end
    assert reader.time_span() == (T0, end)
    assert [t.taken_at for t in reader.gpu_ticks()][-1] == end


@pytest.mark.parametrize(
    ("host", "stopped"),
    [
        ((T0 + 0.5,), []),  # the session ends 0.5 s after the last container row
        ((T0 + 0.5, T0 + 3), [T0 + 1.5]),  # host.csv goes on 2.5 s longer: the containers stopped
    ],
)
def test_the_containers_stopped_tick_comes_only_before_the_sessions_end(
    tmp_path: Path, host: tuple[float, ...], stopped: list[float]
) -> None:
    # metrics.csv goes on to T0+9, but only gpu.csv and host.csv end the session
    root = write(
        tmp_path / "s", rows(0, 1), host=list(host), metrics=[T0 + 9], containers=[T0 + 0.5]
    )
    ticks = list(SessionReader(root).container_ticks())
    assert [t.taken_at for t in ticks] == [T0 + 0.5, *stopped]
    assert [len(t.containers) for t in ticks] == [1] + [0] * len(stopped)


def test_without_gpu_or_host_rows_no_stopped_tick_is_made_up(tmp_path: Path) -> None:
    root = write(tmp_path / "s", [], metrics=[T0 + 9], containers=[T0 + 0.5])
    assert [t.taken_at for t in SessionReader(root).container_ticks()] == [T0 + 0.5]


def test_the_first_problem_of_each_file_is_told_once_with_the_file_name(tmp_path: Path) -> None:
    # what the replay shows in each collector's pane: one notice per file, the first problem
    gpu = rows(0, 1)
    gpu.insert(1, gpu.pop(1).replace(f"{T0 + 1}", "oops", 1))
    gpu.append(gpu_row(T0 + 2, 0, 1 << 30, 150))  # utilization 150 %: a bad cell
    root = write(tmp_path / "s", gpu, host=[T0, T0 + 1], metrics=[T0])
    with (root / "host.csv").open("a") as f:
        f.write("soon,1,2,3\n")
    with (root / "metrics.csv").open("a") as f:
        f.write(f"{T0 + 1},command,2,train/loss,tensor(0.4),2,0\n")
    told: list[tuple[str, str]] = []
    reader = SessionReader(root, on_problem=lambda name, text: told.append((name, text)))
    reader.check(strict=False)
    list(reader.gpu_ticks())  # a second pass tells nothing new
    assert told == [
        ("gpu.csv", f"{root}/gpu.csv:3: skipped: t: 'oops' is not a number"),
        ("host.csv", f"{root}/host.csv:4: skipped: t: 'soon' is not a number"),
        ("metrics.csv", f"{root}/metrics.csv:3: skipped: value: 'tensor(0.4)' is not a number"),
    ]
    gpu_notes = [
        "skipped 1 line that could not be read (first: line 3: t: 'oops' is not a number)",
        "1 bad cell read as N/A (first: line 4, util_gpu_pct: '150' is outside 0 to 100)",
    ]
    assert reader.warnings == [
        *(f"{root}/gpu.csv: {note}" for note in gpu_notes),
        f"{root}/host.csv: skipped 1 line that could not be read (first: line 4: t: 'soon' is "
        "not a number)",
        f"{root}/metrics.csv: skipped 1 line that could not be read (first: line 3: value: "
        "'tensor(0.4)' is not a number)",
    ]
    with pytest.raises(SessionFormatError) as refused:
        reader.check()  # the first file with a problem, all of its problems
    assert refused.value.msg == f"{root}/gpu.csv: " + "; ".join(gpu_notes)


def test_a_clean_session_passes_the_strict_check(tmp_path: Path) -> None:
    root = write(
        tmp_path / "s", rows(0, 1, gpus=2), host=[T0, T0 + 1], metrics=[T0], containers=[T0]
    )
    (root / "events.jsonl").write_text('{"t": 1, "kind": "start"}\n')
    (root / "processes.csv").write_text(process_rows((0, "20"), (1, "20")))
    reader = SessionReader(root)
    assert reader.headers == {
        "gpu.csv": GPU_HEADER.split(","),
        "host.csv": list(HOST_WRITTEN),
        "metrics.csv": list(METRICS_COLUMNS),
        "containers.csv": list(CONTAINER_COLUMNS),
        "processes.csv": PROCESS_HEADER.strip().split(","),
    }
    reader.check()
    assert reader.warnings == []
    assert reader.time_span() == (T0, T0 + 1)


def test_a_meta_problem_is_a_note_too(tmp_path: Path) -> None:
    root = write(tmp_path / "s", rows(0))
    meta = json.loads((root / "meta.json").read_text())
    (root / "meta.json").write_text(json.dumps({**meta, "interval_s": -1}))
    reader = SessionReader(root)
    assert reader.meta.get("interval_s") is None
    assert reader.warnings == [
        f"{root}/meta.json: ignored 'interval_s': must be seconds, above 0 and at most 1e6, not -1"
    ]


def test_a_gpu_csv_that_cannot_be_read_is_named_with_why(tmp_path: Path) -> None:
    root = write(tmp_path / "s", [])
    (root / "gpu.csv").unlink()
    (root / "gpu.csv").mkdir()
    with pytest.raises(SessionFormatError) as refused:
        SessionReader(root)
    assert refused.value.msg == f"{root}/gpu.csv: cannot read: Is a directory"


@pytest.mark.parametrize(
    ("events", "notes"),
    [
        (b"", []),  # created, nothing written yet: nothing was cut
        (b"{", [CUT]),  # one byte, no newline
        (b"\n", []),
    ],
)
def test_a_short_events_file_is_cut_only_without_its_newline(
    tmp_path: Path, events: bytes, notes: list[str]
) -> None:
    root = write(tmp_path / "s", rows(0))
    (root / "events.jsonl").write_bytes(events)
    reader = SessionReader(root)
    assert reader.warnings == [f"{root}/events.jsonl: {n}" for n in notes]  # before reading
    assert list(reader.events()) == []
    assert reader.warnings == [f"{root}/events.jsonl: {n}" for n in notes]


def test_missing_columns_are_named_together(tmp_path: Path) -> None:
    root = write(tmp_path / "s", rows(0))
    lines = [line.split(",") for line in (root / "gpu.csv").read_text().splitlines()]
    keep = [i for i, name in enumerate(lines[0]) if name not in ("temp_c", "power_w")]
    (root / "gpu.csv").write_text("".join(",".join(c[i] for i in keep) + "\n" for c in lines))
    reader = SessionReader(root)
    assert reader.last_t == {"gpu.csv": T0}  # the one row, right after the header
    assert reader.warnings == [f"{root}/gpu.csv: no temp_c, power_w columns; read as N/A"]
    [tick] = reader.gpu_ticks()
    assert (tick.devices[0].temperature_c, tick.devices[0].power_w) == (None, None)


def test_a_cut_events_line_is_said_at_once_and_once(tmp_path: Path) -> None:
    root = write(tmp_path / "s", rows(0))
    (root / "events.jsonl").write_text('{"t": 1, "kind": "start"}\n{"t": 2, "ki')
    reader = SessionReader(root)
    said = [f"{root}/events.jsonl: {CUT}"]
    assert reader.warnings == said  # before any event is read: a replay shows it first
    assert [e["kind"] for e in reader.events()] == ["start"]
    assert reader.warnings == said


PROCESS_HEADER = "t,gpu,pid,used_bytes,user,command,cpu_pct\n"


def process_rows(*lines: tuple[float, str]) -> str:
    return PROCESS_HEADER + "".join(
        f"{T0 + s},0,100,{1 << 30},alice,python train.py,{cpu}\n" for s, cpu in lines
    )


def test_a_later_pass_that_counts_less_does_not_hide_a_bad_cell(tmp_path: Path) -> None:
    # processes.csv's cells are checked where the GPU ticks join it; the host samples' join
    # reads the same lines to the same end without counting them again
    root = write(tmp_path / "s", rows(0, 1), host=[T0, T0 + 1])
    (root / "processes.csv").write_text(process_rows((0, "-5"), (1, "20")))
    reader = SessionReader(root)
    list(reader.gpu_ticks())
    assert [h.processes[0].user for h in reader.host_samples()] == ["alice", "alice"]
    assert reader.warnings == [
        f"{root}/processes.csv: 1 bad cell read as N/A (first: line 2, cpu_pct: '-5' is "
        "outside 0 to 1000000)"
    ]


def test_a_cut_line_that_an_earlier_partial_pass_stopped_short_of_still_fails_the_check(
    tmp_path: Path,
) -> None:
    # time_span() reads processes.csv up to its line 3 only; check() reads on to the cut line
    root = write(tmp_path / "s", rows(0, 1), host=[T0, T0 + 0.5])
    (root / "processes.csv").write_text(process_rows((0, "20"), (1, "20")) + f"{T0 + 2},0,1")
    reader = SessionReader(root)
    assert reader.time_span() == (T0, T0 + 1)
    with pytest.raises(SessionFormatError) as refused:
        reader.check()
    assert refused.value.msg == f"{root}/processes.csv: {CUT}"  # the path said once


def test_the_furthest_pass_of_a_rewritten_file_is_the_one_reported(tmp_path: Path) -> None:
    # a file that changes between passes (rewritten while replayed): the pass that read
    # further is the complete one, even when an earlier, shorter one found more problems
    root = write(tmp_path / "s", rows(0))
    events = root / "events.jsonl"
    events.write_text('not json\n{"t": 1, "kind": "a"}\n')
    reader = SessionReader(root)
    assert [e["kind"] for e in reader.events()] == ["a"]
    assert len(reader.warnings) == 1
    events.write_text('{"t": 1, "kind": "a"}\n{"t": 2, "kind": "b"}\n{"t": 3, "kind": "c"}\n')
    assert [e["kind"] for e in reader.events()] == ["a", "b", "c"]
    assert reader.warnings == []


def test_an_optional_file_gone_between_the_listing_and_the_opening_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # host.csv is deleted right after the reader saw it exist (a session being cleaned up)
    root = write(tmp_path / "s", rows(0), host=[T0])
    is_file = Path.is_file

    def seen_then_gone(path: Path) -> bool:
        there = is_file(path)
        if path.name == "host.csv" and there:
            path.unlink()
        return there

    monkeypatch.setattr(Path, "is_file", seen_then_gone)
    reader = SessionReader(root)
    assert reader.headers.keys() == {"gpu.csv"}
    assert reader.warnings == [
        f"{root}/host.csv: missing (a session must have it); the file is ignored"
    ]


MIB = 1 << 20  # the longest events.jsonl line read, without its newline


def event_line(kind: str, length: int) -> bytes:
    head = f'{{"t": 1, "kind": "{kind}", "pad": "'.encode()
    line = head + b"x" * (length - len(head) - 2) + b'"}'
    assert len(line) == length
    return line


@pytest.mark.parametrize(
    ("lines", "kinds", "skipped"),
    [
        ([event_line("big", MIB), b'{"t": 2, "kind": "after"}'], ["big", "after"], None),
        (
            [b'{"t": 1, "kind": "a"}', event_line("big", MIB + 1), b'{"t": 2, "kind": "after"}'],
            ["a", "after"],
            "line 2: longer than 1 MiB",
        ),
        # read a piece at a time, and still one line
        (
            [b'{"t": 1, "kind": "a"}', event_line("big", 5 * MIB // 2), b"not json"],
            ["a"],
            "line 2: longer than 1 MiB",
        ),
        ([b'{"t": 1, "kind": "a"}', b"", b"   ", b'{"t": 2, "kind": "b"}'], ["a", "b"], None),
        ([b'{"t": 1, "kind": "caf\xe9 \xff"}'], ["caf\ufffd \ufffd"], None),  # not UTF-8
    ],
)
def test_events_lines_up_to_one_mib_are_read_and_longer_ones_skipped(
    tmp_path: Path, lines: list[bytes], kinds: list[str], skipped: str | None
) -> None:
    root = write(tmp_path / "s", rows(0))
    (root / "events.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    reader = SessionReader(root)
    assert [e["kind"] for e in reader.events()] == kinds
    count = 2 if lines[-1] == b"not json" else 1
    said = (
        []
        if skipped is None
        else [
            f"{root}/events.jsonl: skipped {count} line{'s' * (count > 1)} that could not be "
            f"read (first: {skipped})"
        ]
    )
    assert reader.warnings == said


def test_a_cut_events_line_longer_than_one_mib_is_a_skipped_line(tmp_path: Path) -> None:
    root = write(tmp_path / "s", rows(0))
    (root / "events.jsonl").write_bytes(b'{"t": 1, "kind": "a"}\n' + event_line("big", 3 * MIB))
    reader = SessionReader(root)
    assert [e["kind"] for e in reader.events()] == ["a"]
    assert reader.warnings == [
        f"{root}/events.jsonl: {CUT}",  # said at once, from the last byte
        f"{root}/events.jsonl: skipped 1 line that could not be read (first: line 2: longer "
        "than 1 MiB)",
    ]


def test_a_cut_events_line_of_exactly_one_mib_is_a_cut_line(tmp_path: Path) -> None:
    root = write(tmp_path / "s", rows(0))
    (root / "events.jsonl").write_bytes(b'{"t": 1, "kind": "a"}\n' + event_line("big", MIB))
    reader = SessionReader(root)
    assert [e["kind"] for e in reader.events()] == ["a"]
    assert reader.warnings == [f"{root}/events.jsonl: {CUT}"]
    with pytest.raises(SessionFormatError) as refused:
        reader.check()
    assert refused.value.msg == f"{root}/events.jsonl: {CUT}"

"""Damaged session directories through `gpuherd summarize` and `--replay`: one reader, one verdict.

Each case copies the `tasks` session, damages one thing, and runs the real commands through the
command line in this process: `gpuherd summarize DIR`, and `gpuherd --replay DIR` (it stops at
"needs a terminal" once the replay is built and checked). Both readers
must accept with the same rows and the same notes, or both refuse with the same one line.
"""

from __future__ import annotations

import gc
import io
import json
import shutil
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from collectors.base import Sampled
from collectors.loop import run_collector
from collectors.replay.replay import SessionReplay
from collectors.session.rows import SessionFormatError
from gpuherd.cli import main
from gpuherd.summary.frames import load_frames

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tests" / "data" / "sessions" / "tasks"
EXAMPLE = REPO / "tests" / "data" / "examples" / "llama_lora.yaml"
GPU_ROWS, HOST_ROWS, METRIC_ROWS, EVENTS = 40, 40, 86, 2


@dataclass
class Accept:
    gpu: int = GPU_ROWS
    host: int = HOST_ROWS
    metrics: int = METRIC_ROWS
    events: int = EVENTS
    notes: list[str] = field(default_factory=list)
    """Expected reader notes; `{d}` is the session directory."""


@dataclass
class Refuse:
    message: str
    """The whole message after `gpuherd: `; `{d}` is the session directory."""


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def set_cell(path: Path, line: int, column: str, value: str) -> None:
    lines = lines_of(path)
    header = lines[0].decode().lstrip("\ufeff").split(",")
    cells = lines[line - 1].split(b",")
    cells[header.index(column)] = value.encode("utf-8", "surrogateescape")
    lines[line - 1] = b",".join(cells)
    path.write_bytes(b"\n".join(lines))


def set_raw_cell(path: Path, line: int, column: str, value: bytes) -> None:
    lines = lines_of(path)
    header = lines[0].decode().split(",")
    cells = lines[line - 1].split(b",")
    cells[header.index(column)] = value
    lines[line - 1] = b",".join(cells)
    path.write_bytes(b"\n".join(lines))


def meta_text(d: Path, old: str, new: str) -> None:
    text = (d / "meta.json").read_text()
    assert old in text
    (d / "meta.json").write_text(text.replace(old, new, 1))


def add_event(d: Path, line: str | bytes) -> None:
    raw = line if isinstance(line, bytes) else line.encode()
    with open(d / "events.jsonl", "ab") as f:
        f.write(raw + b"\n")


def drop_column(path: Path, column: str) -> None:
    lines = [line.split(",") for line in path.read_text().splitlines()]
    at = lines[0].index(column)
    path.write_text("".join(",".join(c[:at] + c[at + 1 :]) + "\n" for c in lines))


STARTED = '"started_at": 1764130000.0'
CASES: dict[str, tuple[Callable[[Path], None], Accept | Refuse]] = {
    "bom_in_gpu_csv": (
        lambda d: (d / "gpu.csv").write_bytes(b"\xef\xbb\xbf" + (d / "gpu.csv").read_bytes()),
        Accept(),
    ),
    "invalid_utf8_in_events": (
        lambda d: add_event(d, b'{"t": 1764130001.0, "kind": "note", "msg": "caf\xe9 \xff"}'),
        Accept(events=EVENTS + 1),
    ),
    "nan_cells": (
        lambda d: (
            set_cell(d / "gpu.csv", 5, "util_gpu_pct", "nan"),
            set_cell(d / "gpu.csv", 6, "temp_c", "NaN"),
            set_cell(d / "host.csv", 4, "cpu_pct", "nan"),
        ),
        # No recorder writes `nan` into a sample's cell: it is damage, named as such.
        Accept(
            notes=[
                "{d}/gpu.csv: 2 bad cells read as N/A (first: line 5, util_gpu_pct: "
                "'nan' is not a finite number)",
                "{d}/host.csv: 1 bad cell read as N/A (first: line 4, cpu_pct: "
                "'nan' is not a finite number)",
            ]
        ),
    ),
    "missing_temp_c_column": (
        lambda d: drop_column(d / "gpu.csv", "temp_c"),
        Accept(notes=["{d}/gpu.csv: no temp_c column; read as N/A"]),
    ),
    "meta_started_at_nan": (
        lambda d: meta_text(d, STARTED, '"started_at": NaN'),
        Refuse(
            "{d}/meta.json: 'started_at' must be a number of Unix seconds (0 to 1e+11), not 'nan'"
        ),
    ),
    "meta_started_at_1e300": (
        lambda d: meta_text(d, STARTED, '"started_at": 1e300'),
        Refuse(
            "{d}/meta.json: 'started_at' must be a number of Unix seconds (0 to 1e+11), not 1e+300"
        ),
    ),
    "meta_ended_at_infinity": (
        lambda d: meta_text(d, '"ended_at": 1764130039.0', '"ended_at": Infinity'),
        Accept(
            notes=["{d}/meta.json: ignored 'ended_at': must be Unix seconds or null, not 'inf'"]
        ),
    ),
    "meta_ended_before_started": (
        lambda d: meta_text(d, '"ended_at": 1764130039.0', '"ended_at": 1764129999.5'),
        Accept(
            notes=[
                "{d}/meta.json: ignored 'ended_at': 1764129999.500 is 0.500 s before "
                "'started_at' (1764130000.000)"
            ]
        ),
    ),
    "meta_interval_nan": (
        lambda d: meta_text(d, '"interval_s": 1.0', '"interval_s": NaN'),
        Accept(
            notes=[
                "{d}/meta.json: ignored 'interval_s': must be seconds, above 0 and at "
                "most 1e6, not 'nan'"
            ]
        ),
    ),
    "meta_run_peaks_a_string": (
        lambda d: meta_text(d, '"run_peaks": [', '"run_peaks": "lots", "old_peaks": ['),
        Accept(notes=["{d}/meta.json: ignored 'run_peaks': must be a list of objects, not 'lots'"]),
    ),
    "meta_gpus_wrong_entries": (
        lambda d: meta_text(d, '"gpus": [', '"gpus": [1, {"index": "zero"}, '),
        Accept(
            notes=[
                "{d}/meta.json: ignored 'gpus': 2 of 3 entries are not objects with "
                "valid index, uuid, name, mem_total_bytes"
            ]
        ),
    ),
    "meta_nested_40_deep": (
        lambda d: meta_text(d, STARTED, STARTED + ', "x": ' + "[" * 40 + "]" * 40),
        Refuse("{d}/meta.json: nested deeper than 32 levels"),
    ),
    "meta_nested_100000_deep": (
        lambda d: meta_text(d, STARTED, STARTED + ', "x": ' + "[" * 100000 + "]" * 100000),
        Refuse("{d}/meta.json: nested deeper than 32 levels"),
    ),
    "meta_not_json": (
        lambda d: meta_text(d, '"host": "tasks-box",', '"host": "tasks-box"'),
        Refuse("{d}/meta.json:5: not valid JSON (Expecting ',' delimiter, column 3)"),
    ),
    "meta_missing": (
        lambda d: (d / "meta.json").unlink(),
        Refuse("{d}: not a gpuherd session (no meta.json in it)"),
    ),
    "meta_newer_schema": (
        lambda d: meta_text(d, '"schema": 1', '"schema": 2'),
        Refuse("{d}/meta.json: schema 2 is newer than this gpuherd reads (1); upgrade gpuherd"),
    ),
    "event_t_nan": (
        lambda d: add_event(d, '{"t": NaN, "kind": "x"}'),
        Accept(
            notes=[
                "{d}/events.jsonl: skipped 1 line that could not be read (first: line "
                "3: 't' must be Unix seconds, not 'nan')"
            ]
        ),
    ),
    "event_t_infinity_and_1e300": (
        lambda d: (
            add_event(d, '{"t": Infinity, "kind": "x"}'),
            add_event(d, '{"t": 1e300, "kind": "x"}'),
        ),
        Accept(
            notes=[
                "{d}/events.jsonl: skipped 2 lines that could not be read (first: line "
                "3: 't' must be Unix seconds, not 'inf')"
            ]
        ),
    ),
    "event_nested_100000_deep": (
        lambda d: add_event(d, '{"t": 1.0, "kind": "x", "d": ' + "[" * 100000 + "]" * 100000 + "}"),
        Accept(
            notes=[
                "{d}/events.jsonl: skipped 1 line that could not be read (first: line "
                "3: nested deeper than 32 levels)"
            ]
        ),
    ),
    "finding_events_without_a_kind": (
        lambda d: (
            add_event(d, '{"t": 1764130036.0, "kind": "finding", "task": "t", "line": 1}'),
            add_event(d, '{"t": 1764130036.0, "kind": "finding", "finding": " "}'),
            add_event(d, '{"t": 1764130036.0, "kind": "finding", "finding": 5}'),
        ),
        Accept(
            notes=[
                "{d}/events.jsonl: skipped 3 lines that could not be read (first: line "
                "3: a finding event's 'finding' must name its kind, not None)"
            ]
        ),
    ),
    "event_not_an_object": (
        lambda d: add_event(d, "[1, 2]"),
        Accept(
            notes=[
                "{d}/events.jsonl: skipped 1 line that could not be read (first: line "
                "3: each line must be a JSON object)"
            ]
        ),
    ),
    "quote_never_closed_in_gpu_csv": (
        lambda d: set_cell(d / "gpu.csv", 10, "name", '"NVIDIA \x81\xfe H100'),
        Accept(
            gpu=GPU_ROWS - 1,
            notes=[
                "{d}/gpu.csv: skipped 1 line that could not be read "
                "(first: line 10: a quoted cell is never closed)"
            ],
        ),
    ),
    "quote_garbage_in_metrics_csv": (
        lambda d: set_cell(d / "metrics.csv", 20, "metric", 'train/"lo"ss'),
        Accept(),
    ),
    "carriage_return_in_gpu_csv": (
        lambda d: set_cell(d / "gpu.csv", 12, "name", "NVI\rDIA"),
        Accept(
            gpu=GPU_ROWS - 1,
            notes=[
                "{d}/gpu.csv: skipped 1 line that could not be read "
                "(first: line 12: a carriage return inside a cell that "
                "is not quoted)"
            ],
        ),
    ),
    "cell_over_128_kib": (
        lambda d: (
            set_cell(d / "gpu.csv", 8, "name", "N" * 200_000),
            set_cell(d / "processes.csv", 8, "command", "python " + "x" * 200_000),
        ),
        Accept(),
    ),
    "line_over_16_mib": (
        lambda d: set_cell(d / "gpu.csv", 8, "name", "N" * (17 << 20)),
        Accept(
            gpu=GPU_ROWS - 1,
            notes=[
                "{d}/gpu.csv: skipped 1 line that could not be read "
                "(first: line 8: line longer than 16 MiB)"
            ],
        ),
    ),
    "gpu_index_inf": (
        lambda d: set_cell(d / "gpu.csv", 7, "gpu", "inf"),
        Accept(
            gpu=GPU_ROWS - 1,
            notes=[
                "{d}/gpu.csv: skipped 1 line that could not be read "
                "(first: line 7: gpu: 'inf' is not a finite number)"
            ],
        ),
    ),
    "t_inf_and_1e300": (
        lambda d: (
            set_cell(d / "gpu.csv", 9, "t", "inf"),
            set_cell(d / "gpu.csv", 11, "t", "1e300"),
        ),
        Accept(
            gpu=GPU_ROWS - 2,
            notes=[
                "{d}/gpu.csv: skipped 2 lines that could not be read "
                "(first: line 9: t: 'inf' is not a finite number)"
            ],
        ),
    ),
    "negative_util_and_total": (
        lambda d: (
            set_cell(d / "gpu.csv", 3, "util_gpu_pct", "-5"),
            set_cell(d / "gpu.csv", 4, "mem_total_bytes", "-1"),
        ),
        Accept(
            notes=[
                "{d}/gpu.csv: 2 bad cells read as N/A (first: line 3, util_gpu_pct: "
                "'-5' is outside 0 to 100)"
            ]
        ),
    ),
    "nan_and_inf_cells": (
        lambda d: (
            set_cell(d / "gpu.csv", 3, "util_gpu_pct", "nan"),
            set_cell(d / "gpu.csv", 4, "temp_c", "inf"),
            set_cell(d / "gpu.csv", 5, "power_w", "-Infinity"),
        ),
        Accept(
            notes=[
                "{d}/gpu.csv: 3 bad cells read as N/A (first: line 3, util_gpu_pct: "
                "'nan' is not a finite number)"
            ]
        ),
    ),
    "inf_cell_alone": (
        lambda d: set_cell(d / "gpu.csv", 6, "mem_used_bytes", "inf"),
        Accept(
            notes=[
                "{d}/gpu.csv: 1 bad cell read as N/A (first: line 6, mem_used_bytes: "
                "'inf' is not a finite number)"
            ]
        ),
    ),
    "nan_epoch_in_metrics": (
        lambda d: set_cell(d / "metrics.csv", 4, "epoch", "NaN"),
        Accept(
            notes=[
                "{d}/metrics.csv: 1 bad cell read as N/A (first: line 4, epoch: "
                "'NaN' is not a finite number)"
            ]
        ),
    ),
    "row_cut_inside_its_last_cell": (
        lambda d: (d / "gpu.csv").write_bytes((d / "gpu.csv").read_bytes()[:-2]),
        Accept(
            gpu=GPU_ROWS - 1,
            notes=["{d}/gpu.csv: dropped the last line, cut short (no newline at the end)"],
        ),
    ),
    "gpu_csv_missing": (
        lambda d: (d / "gpu.csv").unlink(),
        Refuse("{d}/gpu.csv: missing (a session must have it)"),
    ),
    "gpu_csv_empty": (
        lambda d: (d / "gpu.csv").write_text(""),
        Refuse("{d}/gpu.csv:1: empty file: no header line"),
    ),
    "gpu_csv_without_gpu_column": (
        lambda d: drop_column(d / "gpu.csv", "gpu"),
        Refuse("{d}/gpu.csv:1: missing required column(s): gpu"),
    ),
    "metrics_value_garbage": (
        lambda d: set_cell(d / "metrics.csv", 30, "value", "tensor(1.2)"),
        Accept(
            metrics=METRIC_ROWS - 1,
            notes=[
                "{d}/metrics.csv: skipped 1 line that could not be read (first: line 30: value: "
                "'tensor(1.2)' is not a number)"
            ],
        ),
    ),
    "metrics_huge_and_tiny_losses": (
        lambda d: (
            set_cell(d / "metrics.csv", 2, "value", "1e308"),
            set_cell(d / "metrics.csv", 4, "value", "1e308"),
            set_cell(d / "metrics.csv", 6, "value", "1e-310"),
            set_cell(d / "metrics.csv", 8, "value", "-inf"),
        ),
        Accept(),
    ),
    "invalid_utf8_in_gpu_name": (
        lambda d: set_raw_cell(d / "gpu.csv", 15, "name", b"NVIDIA \xff\xfe"),
        Accept(),
    ),
    "host_csv_without_cpu_pct": (
        lambda d: drop_column(d / "host.csv", "cpu_pct"),
        Accept(notes=["{d}/host.csv: no cpu_pct column; read as N/A"]),
    ),
    "host_csv_without_t": (
        lambda d: drop_column(d / "host.csv", "t"),
        Accept(
            host=0, notes=["{d}/host.csv:1: missing required column(s): t; the file is ignored"]
        ),
    ),
    "processes_bad_pid": (lambda d: set_cell(d / "processes.csv", 6, "pid", "-1"), Accept()),
}


def replay_counts(directory: Path) -> tuple[int, int, int, int, list[str]]:
    """Rows the replay collectors hand out, and the reader's notes after reading it all."""
    replay = SessionReplay(directory, speed=1e9, check_all=True)
    counts = {"replay:gpu": 0, "replay:host": 0, "replay:metrics": 0}
    for collector in replay.collectors():
        events: list[object] = []
        run_collector(collector, events.append, threading.Event())
        for event in events:
            if isinstance(event, Sampled):
                sample = event.sample
                counts[collector.name] += (
                    len(sample.devices)
                    if collector.name == "replay:gpu"
                    else 1
                    if collector.name == "replay:host"
                    else sum(len(m.values) for _, m in sample.metrics)
                )
    events_read = sum(1 for _ in replay.session.events())
    return (
        counts["replay:gpu"],
        counts["replay:host"],
        counts["replay:metrics"],
        events_read,
        replay.warnings,
    )


def summarize_cli(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`gpuherd summarize DIR`: its exit code and what it wrote on stderr.

    Warnings (pandas', numpy's) count as stderr, as a user would see them printed. Garbage
    left by earlier tests in this worker is collected first: a `Popen` collected while the
    command runs would warn that its process is still running, which is not the command's.
    """
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["summarize", str(directory)])
    return code, capsys.readouterr().err + "".join(f"{w.message}\n" for w in caught)


def note_cli(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["note", str(directory), "--example", str(EXAMPLE), "--dry-run"])
    out = capsys.readouterr()
    return code, out.out, out.err


def replay_cli(
    directory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # never a terminal: no dashboard
    code = main(["--replay", str(directory)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(CASES))
def test_summarize_and_replay_agree_on_a_damaged_session(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    damage, expected = CASES[case]
    d = tmp_path / "s"
    shutil.copytree(TASKS, d)
    damage(d)
    summary_code, summary_err = summarize_cli(d, capsys)
    code, replay_err = replay_cli(d, capsys, monkeypatch)
    note_code, note_out, note_err = note_cli(d, capsys)
    assert "Traceback" not in summary_err + replay_err + note_err
    if isinstance(expected, Refuse):
        message = expected.message.format(d=d)
        assert (summary_code, summary_err) == (2, f"gpuherd: {message}\n")
        assert (code, replay_err) == (2, f"gpuherd: {message}\n")
        assert (note_code, note_out, note_err) == (2, "", f"gpuherd: {message}\n")
        for read in (load_frames, SessionReplay):
            with pytest.raises(SessionFormatError) as refused:
                read(d)
            assert refused.value.msg == message
        return
    assert summary_code == 0, summary_err
    assert summary_err == "" and (d / "summary.md").is_file()
    assert code == 2 and replay_err.startswith("gpuherd: the dashboard needs a terminal")
    assert (note_code, note_err) == (0, "") and "+  last_verification_note: " in note_out
    frames = load_frames(d)
    notes = [n.format(d=d) for n in expected.notes]
    summarized = (
        len(frames.gpu),
        0 if frames.host is None else len(frames.host),
        0 if frames.metrics is None else len(frames.metrics),
        len(frames.events),
    )
    assert summarized == (expected.gpu, expected.host, expected.metrics, expected.events)
    assert frames.warnings == notes
    *replayed, replay_notes = replay_counts(d)
    assert tuple(replayed) == summarized
    # summarize reads only the header of processes.csv: its rows are the replay's alone
    assert [n for n in replay_notes if "/processes.csv:" not in n] == notes
    if case == "processes_bad_pid":
        assert replay_notes == [
            f"{d}/processes.csv: skipped 1 line that could not be read "
            "(first: line 6: pid: '-1' is outside 0 to 4294967295)"
        ]
    data = json.loads((d / "summary.json").read_text())
    assert data["warnings"] == notes


def test_missing_directory_is_refused_by_both(tmp_path: Path, capsys, monkeypatch) -> None:
    missing = tmp_path / "nowhere"
    assert summarize_cli(missing, capsys) == (
        2,
        f"gpuherd: {missing}: not a gpuherd session (no such directory)\n",
    )
    assert replay_cli(missing, capsys, monkeypatch) == (
        2,
        f"gpuherd: {missing}: not a gpuherd session (no such directory)\n",
    )


def test_bad_cells_read_as_na_in_both_readers(tmp_path: Path) -> None:
    d = shutil.copytree(TASKS, tmp_path / "s")
    CASES["negative_util_and_total"][0](d)
    CASES["nan_cells"][0](d)
    frames = load_frames(d)
    ticks = list(SessionReplay(d).session.gpu_ticks())
    replayed = [
        (t.taken_at, s.gpu_util_pct, s.memory_total_bytes, s.temperature_c)
        for t in ticks
        for s in t.devices
    ]
    gpu = frames.gpu
    summarized = [
        (t, None if u != u else u, None if m != m else int(m), None if c != c else c)
        for t, u, m, c in zip(
            gpu["t"], gpu["util_gpu_pct"], gpu["mem_total_bytes"], gpu["temp_c"], strict=True
        )
    ]
    assert summarized == replayed
    assert replayed[1][1] is None and replayed[2][2] is None  # -5 %, -1 bytes
    assert replayed[3][1] is None and replayed[4][3] is None  # nan, NaN
    assert replayed[0][1:] == (40.0, 85520809984, 61.0)


def test_replay_speed_too_slow_to_show_anything_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    assert main(["--replay", str(TASKS), "--speed", "1e-300"]) == 2
    assert capsys.readouterr().err == (
        "gpuherd: Replay: --speed 1e-300 is too slow to show anything; use 1e-06 or more\n"
    )

"""Run summaries computed from session directories written by hand and by the real writer."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.session.rows import SessionFormatError
from collectors.session.session_format import (
    EVENTS_FILE,
    GPU_FILE,
    GPU_WRITTEN,
    HOST_FILE,
    HOST_WRITTEN,
    META_FILE,
    METRICS_COLUMNS,
    METRICS_FILE,
    SCHEMA_VERSION,
)
from gpuherd.note.note import compose
from gpuherd.summary import report
from gpuherd.summary.frames import load_frames
from gpuherd.summary.summary import STAT_COLUMNS, direction, stat_key, summarize

GIB = 1 << 30
T0 = 1_764_130_000.0
H200_TOTAL = 150_754_820_096
GPU_HEADER = ",".join((*GPU_WRITTEN, "mem_peak_bytes"))


def write_session(
    root: Path,
    *,
    gpu_rows: list[str],
    metrics: list[str] | None = None,
    events: list[dict] | None = None,
    meta: dict | None = None,
    host_rows: list[str] | None = None,
    tail: dict[str, str] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    base = {
        "schema": SCHEMA_VERSION,
        "host": "box-7",
        "driver": "580.159.04",
        "started_at": T0,
        "ended_at": T0 + 20,
        "interval_s": 1.0,
        "gpus": [
            {"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA H200", "mem_total_bytes": H200_TOTAL}
        ],
    }
    (root / META_FILE).write_text(json.dumps({**base, **(meta or {})}))
    tail = tail or {}
    (root / GPU_FILE).write_text("\n".join([GPU_HEADER, *gpu_rows]) + "\n" + tail.get("gpu", ""))
    if metrics is not None:
        (root / METRICS_FILE).write_text(
            "\n".join([",".join(METRICS_COLUMNS), *metrics]) + "\n" + tail.get("metrics", "")
        )
    if events is not None:
        (root / EVENTS_FILE).write_text(
            "".join(json.dumps(e) + "\n" for e in events) + tail.get("events", "")
        )
    if host_rows is not None:
        (root / HOST_FILE).write_text("\n".join([",".join(HOST_WRITTEN), *host_rows]) + "\n")
    return root


def gpu_row(
    t: float,
    gpu: int,
    used: float,
    util: float,
    peak: float | None = None,
    temp: float = 40,
    power: float = 100,
    uuid: str = "GPU-aaaa",
) -> str:
    peak_cell = "" if peak is None else str(int(peak))
    return (
        f"{t},{gpu},{uuid},NVIDIA H200,{int(used)},{H200_TOTAL},{util},10,{temp},{power},"
        f"{peak_cell}"
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A 20 s session: the command runs from t0+5 to t0+15 with a 30 GiB spike at t0+9."""
    rows = []
    for i in range(21):
        inside = 5 <= i <= 15
        util = (40 + 4 * i) if inside else 0
        peak = 30 * GIB if i == 9 else None
        rows.append(
            gpu_row(
                T0 + i,
                0,
                (2 + (8 if inside else 0)) * GIB,
                util,
                peak,
                temp=40 + i,
                power=100 + 10 * i,
            )
        )
        rows.append(gpu_row(T0 + i, 1, 1 * GIB, 0, uuid="GPU-bbbb"))
    metrics = []
    for i in range(10):
        t = T0 + 5.5 + i
        metrics.append(
            f"{t},command,{i + 1},train/loss,{2.31 - 0.2 * i:.2f},{(i + 1) * 120},{i // 4}"
        )
        metrics.append(f"{t},command,{i + 1},lr,0.001,{(i + 1) * 120},{i // 4}")
    metrics.append(f"{T0 + 15.1},command,11,train/loss,nan,1200,2")
    metrics += [
        f"{T0 + 8},command,5,val/acc,0.62,480,1",
        f"{T0 + 14},command,10,val/acc,0.91,1200,2",
    ]
    events = [
        {"t": T0 + 5.0, "kind": "start", "pid": 4242, "command": ["python", "train.py"]},
        {
            "t": T0 + 12.0,
            "kind": "finding",
            "task": "command",
            "line": 7,
            "finding": "oom",
            "evidence": "torch.OutOfMemoryError: CUDA out of memory.",
        },
        {"t": T0 + 15.0, "kind": "exit", "exit_code": 0},
    ]
    return write_session(
        tmp_path / "run",
        gpu_rows=rows,
        metrics=metrics,
        events=events,
        meta={"command": ["python", "train.py"], "exit_code": 0},
        host_rows=[f"{T0 + i + 0.5},{10 + i},{8 * GIB},{64 * GIB}" for i in range(20)],
    )


def test_gpu_peak_takes_the_fast_peak_and_says_when(run_dir: Path) -> None:
    gpus = summarize(run_dir).data["gpus"]
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["peak_mem_bytes"] == 30 * GIB
    assert gpus[0]["peak_at"] == T0 + 9
    assert gpus[0]["peak_at_elapsed_s"] == 9.0
    assert gpus[0]["peak_mem_pct"] == round(100 * 30 * GIB / H200_TOTAL, 2)
    # No fast peaks recorded for GPU 1: the 1 Hz reading is its peak.
    assert gpus[1]["peak_mem_bytes"] == 1 * GIB
    assert gpus[1]["uuid"] == "GPU-bbbb"


def test_utilization_covers_only_the_commands_run(run_dir: Path) -> None:
    data = summarize(run_dir).data
    assert data["window"] == {"start": T0 + 5, "end": T0 + 15, "source": "command"}
    inside = np.array([40 + 4 * i for i in range(5, 16)], dtype=float)
    assert data["gpus"][0]["util_mean_pct"] == pytest.approx(inside.mean(), abs=0.01)
    assert data["gpus"][0]["util_p95_pct"] == pytest.approx(np.percentile(inside, 95), abs=0.01)
    assert data["gpus"][0]["temp_max_c"] == 60
    assert data["gpus"][0]["power_max_w"] == 300


def test_without_a_command_the_window_is_the_whole_session(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + i, 0, GIB, 10 * i) for i in range(5)]
    data = summarize(write_session(tmp_path / "s", gpu_rows=rows)).data
    assert data["window"]["source"] == "session"
    assert data["gpus"][0]["util_mean_pct"] == 20


def test_task_metrics_first_last_best_and_extent(run_dir: Path) -> None:
    task = summarize(run_dir).data["tasks"][0]
    assert task["task"] == "command"
    loss = task["metrics"]["train/loss"]
    assert loss["first"] == 2.31
    assert loss["last"] == "nan"  # the NaN is reported, not hidden
    assert loss["best"] == pytest.approx(2.31 - 0.2 * 9)
    assert loss["best_is"] == "min"
    assert loss["count"] == 11 and loss["nonfinite"] == 1
    acc = task["metrics"]["val/acc"]
    assert (acc["first"], acc["last"], acc["best"], acc["best_is"]) == (0.62, 0.91, 0.91, "max")
    assert task["metrics"]["lr"]["best"] is None
    assert task["steps"] == {"first": 120, "last": 1200}
    assert task["epochs"] == {"first": 0, "last": 2}
    assert task["steps_per_s"] == pytest.approx((1200 - 120) / (15.1 - 5.5), rel=1e-3)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("train/loss", "min"),
        ("val/loss", "min"),
        ("val/perplexity", "min"),
        ("val/acc", "max"),
        ("val/acc_top5", "max"),
        ("val/map_50", "max"),
        ("val/miou", "max"),
        ("lr", None),
        ("throughput/it_s", None),
        ("grad_norm", None),
    ],
)
def test_best_direction(name: str, expected: str | None) -> None:
    assert direction(name) == expected


def test_stats_frame_has_one_row_per_scope_and_metric(run_dir: Path) -> None:
    stats = summarize(run_dir).stats
    assert tuple(stats.columns) == STAT_COLUMNS
    assert stat_key("gpu0", "util_gpu", "%") == "gpu0/util_gpu (%)"
    util = stats.loc["gpu0/util_gpu (%)"]
    inside = np.array([40 + 4 * i for i in range(5, 16)], dtype=float)
    assert util["count"] == len(inside)
    assert util["p95"] == pytest.approx(np.percentile(inside, 95))
    assert (util["min"], util["max"], util["unit"]) == (inside.min(), inside.max(), "%")
    peak = stats.loc["gpu0/mem_peak (GiB)"]
    assert peak["max"] == pytest.approx(30.0)
    assert "host/cpu (%)" in stats.index
    loss = stats.loc["command/train/loss"]
    assert loss["count"] == 10 and loss["unit"] == ""
    assert stats.index.is_unique


def test_findings_and_exit_code(run_dir: Path) -> None:
    data = summarize(run_dir).data
    assert data["session"]["exit_code"] == 0
    assert data["findings"]["total"] == 1
    assert data["findings"]["by_kind"][0]["finding"] == "oom"
    assert data["findings"]["by_kind"][0]["first_line"] == 7


def test_truncated_last_lines_are_dropped_and_said(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + i, 0, GIB * (i + 1), 50) for i in range(4)]
    root = write_session(
        tmp_path / "s",
        gpu_rows=rows,
        metrics=[f"{T0 + 1},command,1,train/loss,1.5,1,0"],
        events=[{"t": T0, "kind": "start"}],
        tail={
            "gpu": f"{T0 + 4},0,GPU-aaaa,NVIDIA H200,999999999999",
            "metrics": f"{T0 + 2},command,2,train/lo",
            "events": '{"t": 17643',
        },
    )
    data = summarize(root).data
    assert data["gpus"][0]["peak_mem_bytes"] == 4 * GIB
    assert data["tasks"][0]["metrics"]["train/loss"]["count"] == 1
    cut = "dropped the last line, cut short (no newline at the end)"
    assert data["warnings"] == [
        f"{root}/{name}: {cut}" for name in ("gpu.csv", "metrics.csv", "events.jsonl")
    ]


def test_last_line_with_too_few_cells_is_skipped_and_counted(tmp_path: Path) -> None:
    rows = [gpu_row(T0 + i, 0, GIB, 50) for i in range(3)] + [f"{T0 + 3},0,GPU-aaaa"]
    root = write_session(tmp_path / "s", gpu_rows=rows)
    data = summarize(root).data
    assert data["gpus"][0]["util_mean_pct"] == 50
    assert data["warnings"] == [
        f"{root}/gpu.csv: skipped 1 line that could not be read "
        "(first: line 5: 3 cells where the header has 11)"
    ]


def test_a_bad_value_reads_as_na_and_is_counted(tmp_path: Path) -> None:
    rows = [
        gpu_row(T0, 0, GIB, 50),
        gpu_row(T0 + 1, 0, GIB, 50).replace(",50,", ",busy,"),
        gpu_row(T0 + 2, 0, GIB, 70),
    ]
    root = write_session(tmp_path / "s", gpu_rows=rows)
    data = summarize(root).data
    assert data["gpus"][0]["util_mean_pct"] == 60  # the two readable values
    assert data["warnings"] == [
        f"{root}/gpu.csv: 1 bad cell read as N/A (first: line 3, "
        "util_gpu_pct: 'busy' is not a number)"
    ]


def test_a_row_with_extra_cells_is_skipped_with_its_line(tmp_path: Path) -> None:
    rows = [
        gpu_row(T0, 0, GIB, 50),
        gpu_row(T0 + 1, 0, GIB, 50) + ",1,2",
        gpu_row(T0 + 2, 0, GIB, 50),
    ]
    root = write_session(tmp_path / "s", gpu_rows=rows)
    frames = load_frames(root)
    assert list(frames.gpu["t"]) == [T0, T0 + 2]
    assert frames.warnings == [
        f"{root}/gpu.csv: skipped 1 line that could not be read "
        "(first: line 3: 13 cells where the header has 11)"
    ]


def test_missing_optional_files_still_summarize(tmp_path: Path) -> None:
    data = summarize(write_session(tmp_path / "s", gpu_rows=[gpu_row(T0, 0, GIB, 5)])).data
    assert data["tasks"] == [] and data["findings"]["total"] == 0
    assert data["gpus"][0]["peak_mem_bytes"] == GIB


def test_no_meta_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "gpu.csv").write_text(GPU_HEADER + "\n")
    with pytest.raises(SessionFormatError, match="not a gpuherd session"):
        summarize(tmp_path)


def test_the_writers_own_session_summarizes(tmp_path: Path) -> None:
    # A fixture written by hand by the session format's authors, with columns we do not use.
    here = Path(__file__).resolve().parents[1] / "data" / "sessions" / "handmade"
    data = summarize(here).data
    assert [g["peak_mem_bytes"] for g in data["gpus"]] == [644874240, 23622320128]


def test_summary_json_is_strict_json(run_dir: Path) -> None:
    text = report.render_json(summarize(run_dir))
    parsed = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert parsed["schema"] == 1
    assert parsed["stats"][0]["key"].startswith("gpu0/")


def test_markdown_has_tables_and_text_charts(run_dir: Path) -> None:
    frames = load_frames(run_dir)
    from gpuherd.summary.summary import summarize_frames

    md = report.render_markdown(summarize_frames(frames), frames)
    assert "| 0 | NVIDIA H200 | 30.0 GiB |" in md
    assert "### VRAM" in md and "### Loss" in md
    assert "\x1b[" not in md  # no terminal colour codes in a Markdown file
    chart = md.split("### VRAM")[1].split("```")[1]
    assert "┌" in chart and "30" in chart
    assert "**oom** x1" in md


def test_write_summary_writes_both_files(run_dir: Path) -> None:
    report.write_summary(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["gpus"][0]["index"] == 0
    assert (run_dir / "summary.md").read_text().startswith("# gpuherd session summary")


def test_interrupt_while_writing_leaves_no_partial_file(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_dir / "summary.md").write_text("previous summary\n")
    real_replace = os.replace

    def interrupted(src: str, dst: str, **dir_fds: int) -> None:
        if str(dst).endswith("summary.md"):
            raise KeyboardInterrupt
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write_summary(run_dir)
    assert (run_dir / "summary.md").read_text() == "previous summary\n"
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_statistics_match_pandas_on_a_random_session(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    util = rng.uniform(0, 100, 200).round(1)
    used = rng.integers(GIB, 40 * GIB, 200)
    rows = [gpu_row(T0 + i, 0, used[i], util[i]) for i in range(200)]
    stats = summarize(write_session(tmp_path / "s", gpu_rows=rows)).stats
    row = stats.loc["gpu0/mem_used (GiB)"]
    assert row["mean"] == pytest.approx(used.mean() / GIB)
    assert row["p95"] == pytest.approx(pd.Series(used).quantile(0.95) / GIB)
    assert math.isclose(stats.loc["gpu0/util_gpu (%)"]["mean"], util.mean())


@pytest.mark.parametrize(
    ("step", "epoch", "shown", "hidden"),
    [
        ("", "5", "epoch 5", "steps"),  # a Lightning Rich bar: epochs, no steps
        ("120", "", "steps 120 to 240", "epoch"),
        ("", "", "duration 1.0s", "steps"),
    ],
)
def test_unknown_steps_and_epochs_are_left_out(
    tmp_path: Path, step: str, epoch: str, shown: str, hidden: str
) -> None:
    later = str(int(step) * 2) if step else ""
    metrics = [
        f"{T0 + 1},command,22,train/loss,0.5,{step},{epoch}",
        f"{T0 + 2},command,23,train/loss,0.4,{later},{epoch}",
    ]
    root = write_session(
        tmp_path / "s", gpu_rows=[gpu_row(T0 + i, 0, GIB, 50) for i in range(3)], metrics=metrics
    )
    summary = summarize(root)
    task = summary.data["tasks"][0]
    for counter, value in (("steps", step), ("epochs", epoch)):
        if not value:
            assert task[counter] == {"first": None, "last": None}
    markdown = report.render_markdown(summary, load_frames(root))
    [extent] = [line for line in markdown.splitlines() if line.startswith("duration ")]
    assert shown in extent and hidden not in extent and "nan" not in extent
    assert "nan" not in report.render_short(summary)
    note = compose(summary).values()["last_verification_note"]
    assert "nan" not in note and ("steps" in note) == bool(step)


def test_the_short_summary_and_the_note_show_the_same_metrics(tmp_path: Path) -> None:
    # a segmentation run reports pixel accuracy; both outputs name it from one vocabulary
    rows = [gpu_row(T0 + i, 0, 2 * GIB, 50) for i in range(3)]
    metrics = [
        f"{T0 + 1},seg,1,val/pixel_acc,0.5,100,0",
        f"{T0 + 2},seg,2,val/pixel_acc,0.75,200,1",
        f"{T0 + 1},seg,1,grad_norm,3,100,0",
        f"{T0 + 2},seg,2,grad_norm,2,200,1",
    ]
    summary = summarize(write_session(tmp_path / "seg", gpu_rows=rows, metrics=metrics))
    assert "  task seg: val/pixel_acc 0.5 -> 0.75" in report.render_short(summary).splitlines()
    assert "val/pixel_acc 0.5 -> 0.75" in compose(summary).text


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (700 * 1024, "700 KiB"),
        (615 * 1024 * 1024, "615 MiB"),
        ((1 << 30) - 1, "1024 MiB"),
        (1 << 30, "1.0 GiB"),
        (30 * (1 << 30), "30.0 GiB"),
        (0, "0 B"),
        (None, "-"),
    ],
)
def test_sizes_take_the_unit_their_magnitude_needs(size, shown) -> None:
    # a 700 KiB container peak read `0.0 GiB`: nothing, where something was there
    assert report.fmt_size(size) == shown

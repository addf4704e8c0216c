"""Metric values at the edges of a float: summaries, charts and the end of a real `--record`."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collectors.session.session_format import METRICS_COLUMNS, METRICS_FILE
from gpuherd.present.chart_values import LIMIT, drawable
from gpuherd.summary import charts, report
from gpuherd.summary.frames import load_frames
from gpuherd.summary.summary import summarize_frames

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tests" / "data" / "sessions" / "tasks"
EXTREMES = ["1e308", "1e-310", "inf", "nan", "-1e308", "5e-324", "1.7976931348623157e308"]


def losses(root: Path, values: list[str]) -> Path:
    shutil.copytree(TASKS, root)
    rows = [",".join(METRICS_COLUMNS)] + [
        f"{1764130001 + i},command,{i + 1},train/loss,{v},{10 * (i + 1)},0"
        for i, v in enumerate(values)
    ]
    (root / METRICS_FILE).write_text("\n".join(rows) + "\n")
    return root


def test_a_real_recording_of_a_log_with_1e308_and_1e_310_ends_with_its_summary(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    script = "for v in ('2.5', '1e308', '1e-310', '1.5'): print(f'step=1 loss={v}', flush=True)"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(root),
            "--peak-interval",
            "0",
            "--",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "could not write the summary" not in out.stderr
    data = json.loads((root / "summary.json").read_text())
    assert data["warnings"] == []
    loss = data["tasks"][0]["metrics"]["train/loss"]
    assert (loss["first"], loss["last"], loss["best"], loss["count"]) == (2.5, 1.5, 1e-310, 4)
    markdown = (root / "summary.md").read_text()
    assert "### Loss" in markdown
    assert "| train/loss | 2.5 | 1.5 | 1e-310 (min) | 4 |" in markdown


def test_summary_of_extreme_losses_is_strict_json_with_the_extremes_as_strings(
    tmp_path: Path,
) -> None:
    frames = load_frames(losses(tmp_path / "s", EXTREMES))
    summary = summarize_frames(frames)
    text = report.render_json(summary)
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    loss = data["tasks"][0]["metrics"]["train/loss"]
    assert (loss["count"], loss["nonfinite"]) == (7, 2)
    assert loss["mean"] == pytest.approx(1.7976931348623157e308 / 5)
    assert (loss["best"], loss["first"], loss["last"]) == (-1e308, 1e308, 1.7976931348623157e308)
    # Two of the largest floats add up past the largest float: the mean reads "inf".
    frames = load_frames(losses(tmp_path / "t", ["1e308", "1.7976931348623157e308"]))
    data = json.loads(report.render_json(summarize_frames(frames)))
    assert data["tasks"][0]["metrics"]["train/loss"]["mean"] == "inf"
    assert data["stats"][-1]["key"] == "command/train/loss"
    assert (data["stats"][-1]["mean"], data["stats"][-1]["max"]) == ("inf", 1.7976931348623157e308)


def test_loss_chart_draws_values_plotext_cannot_scale_at_the_edge(tmp_path: Path) -> None:
    frames = load_frames(losses(tmp_path / "s", EXTREMES + ["0.5", "0.25"]))
    chart = charts.loss_chart(frames)
    lines = chart.splitlines()
    assert lines[0].strip() == "loss" and "• command: train/loss" in lines[2]
    assert lines[2].startswith(" 1000000000000000.0┤")  # 1e308 drawn at the edge, 1e15
    assert lines[14].startswith("-1000000000000000.0┤")  # -1e308 too
    assert chart.count("•") > 40  # a line was drawn, not an empty frame


@pytest.mark.parametrize(
    "values", [["1e308"], ["1e-310"], ["1e-310", "2e-310"], ["1e308", "-1e308"], ["inf", "nan"]]
)
def test_loss_chart_of_only_extreme_values(tmp_path: Path, values: list[str]) -> None:
    frames = load_frames(losses(tmp_path / "s", values))
    chart = charts.loss_chart(frames)
    finite = [float(v) for v in values if math.isfinite(float(v))]
    assert bool(chart) == bool(finite)
    assert ("•" in chart) == bool(finite)


def test_drawable_points_keep_order_and_pin_the_edges() -> None:
    xs, ys = drawable([0, 1, 2, 3, 4, 5], [1e308, -1e308, 1e-310, math.nan, 5.0, math.inf])
    assert (xs, ys) == ([0.0, 1.0, 2.0, 4.0], [LIMIT, -LIMIT, 0.0, 5.0]) and LIMIT == 1e15
    xs, ys = drawable([-700, -10, 0], [-5.0, 1e20, 50.0], x_range=(-600, 0), y_range=(0, 100))
    assert (xs, ys) == ([-10.0, 0.0], [100.0, 50.0])


def test_vram_chart_with_extreme_memory_values(tmp_path: Path) -> None:
    root = shutil.copytree(TASKS, tmp_path / "s")
    lines = (root / "gpu.csv").read_text().splitlines()
    cells = lines[3].split(",")
    cells[4] = str(2**53 - 1)  # the largest count a cell may hold
    lines[3] = ",".join(cells)
    (root / "gpu.csv").write_text("\n".join(lines) + "\n")
    frames = load_frames(root)
    assert frames.gpu["mem_used_bytes"].max() == float(2**53 - 1)
    chart = charts.vram_chart(frames)
    assert chart.splitlines()[0].strip().startswith("VRAM (GiB)") or "VRAM" in chart
    assert np.isfinite(frames.gpu["mem_used_bytes"]).all()

"""The summary's loss chart is over steps, as the docs say, with whole steps on its axis."""

from __future__ import annotations

from pathlib import Path

from gpuherd.summary.charts import loss_chart
from gpuherd.summary.frames import load_frames
from tests.unit.test_summary import GIB, T0, gpu_row, write_session


def session(root: Path, metrics: list[str]) -> Path:
    rows = [gpu_row(T0 + i, 0, 2 * GIB, 50) for i in range(5)]
    return write_session(root, gpu_rows=rows, metrics=metrics)


def axis(chart: str) -> tuple[str, list[str]]:
    """The x label and the tick labels under the axis."""
    lines = chart.splitlines()
    under = next(i for i, line in enumerate(lines) if "└" in line)
    return lines[under + 2].strip(), lines[under + 1].split()


def test_a_val_loss_without_a_step_does_not_turn_the_axis_into_minutes(tmp_path: Path) -> None:
    metrics = [
        f"{T0 + i},command,{i + 1},train/loss,{2 - i / 1000},{237 * i + 3},0" for i in range(1000)
    ]
    metrics += [f"{T0 + 500},command,2000,val/loss,1.5,,1"]  # an evaluation logs no step
    label, ticks = axis(loss_chart(load_frames(session(tmp_path / "s", metrics))))
    assert label == "step"
    assert ticks and all(t.isdigit() for t in ticks)  # never 47360.2


def test_a_log_without_steps_is_drawn_over_epochs_spread_across_each(tmp_path: Path) -> None:
    metrics = [f"{T0 + i},command,{i + 1},train/loss,{2 - i / 40},,{i // 10}" for i in range(40)]
    chart = loss_chart(load_frames(session(tmp_path / "s", metrics)))
    label, ticks = axis(chart)
    assert label == "epoch"
    marks = sum(line.count("•") for line in chart.splitlines())
    assert marks >= 30  # 40 points at 40 places, not 4 columns of 10

"""The `stalled` rule judges the loss over the later half of the run, not over its last points."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from gpuherd.cli import main
from gpuherd.tasks import TaskTracker
from gpuherd.tasks.health import judge
from parsers import health
from tests.unit.test_tasks import TASK, batch, kinds, metric

STEPS = 3000


def noisy(loss: float, rng: random.Random) -> float:
    """A per-step loss as a real run logs it: +-2 % batch-to-batch noise around the trend."""
    return loss * (1.0 + rng.uniform(-0.02, 0.02))


def healthy(step: int) -> float:
    """A healthy run late in training: the loss still falls, by under 0.2 % per 50 steps."""
    return 1.5 + 2.5 * math.exp(-step / 3000)


def track(losses: list[float]) -> TaskTracker:
    tracker = TaskTracker()
    for step, loss in enumerate(losses):
        tracker.add_batch(batch(step, [metric(step=step, train__loss=loss)]))
    return tracker


def test_a_healthy_run_logging_every_step_is_not_stalled() -> None:
    rng = random.Random(7)
    tracker = track([noisy(healthy(s), rng) for s in range(STEPS)])
    assert kinds(tracker.view(TASK)) == []


def test_a_flat_loss_logged_every_step_is_stalled() -> None:
    rng = random.Random(7)
    tracker = track([noisy(2.0, rng) for _ in range(STEPS)])
    stalled = [f for f in tracker.view(TASK).findings if f.kind == "stalled"]
    assert len(stalled) == 1 and stalled[0].severity == "warning"
    # judged over the later half of the run: steps 1500 to 2999 (of the chart's points)
    assert stalled[0].evidence.endswith(f"over steps 1500-{STEPS - 1}")


def step_loss(drop: float) -> list[tuple[float, float]]:
    """200 points: falling, then flat at 2.0 over steps 100-149 and `drop` lower over 150-199."""
    return (
        [(float(s), 3.0 - 0.01 * s) for s in range(100)]
        + [(float(s), 2.0) for s in range(100, 150)]
        + [(float(s), 2.0 * (1.0 - drop)) for s in range(150, 200)]
    )


def test_the_threshold_is_a_one_percent_fall_across_the_later_half() -> None:
    assert health.stalled(step_loss(0.012)) is None
    found = health.stalled(step_loss(0.008))
    assert found is not None
    assert found.evidence == "loss mean 2 -> 1.984 over steps 100-199"


def test_fewer_than_fifty_points_give_no_verdict() -> None:
    flat = [(float(s), 2.0) for s in range(60)]
    assert health.stalled(flat[:49]) is None
    assert health.stalled(flat[:50]) is not None


def test_a_per_epoch_step_counter_is_judged_by_point_order() -> None:
    # steps restart at 0 every epoch: the later half is the later half of the points
    restart = [(float(s % 20), 2.0) for s in range(100)]
    found = health.stalled(restart)
    assert found is not None and found.kind == "stalled"


def test_judge_reads_the_whole_run_for_the_loss_and_the_window_for_the_rest() -> None:
    whole = step_loss(0.012)
    recent = whole[-50:]  # flat: the old rule's view
    assert judge({"train/loss": recent}, runs={"train/loss": whole}) == []
    assert [f.kind for _, f in judge({"train/loss": recent})] == ["stalled"]


def test_parse_and_the_dashboard_agree_on_a_long_healthy_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(3)
    lines = [f"step={s} loss={noisy(healthy(s), rng):.5f}" for s in range(STEPS)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    assert main(["parse", "--json", str(log)]) == 0
    assert '"finding"' not in capsys.readouterr().out
    flat = tmp_path / "flat.log"
    flat.write_text("\n".join(f"step={s} loss={noisy(2.0, rng):.5f}" for s in range(STEPS)) + "\n")
    assert main(["parse", "--json", str(flat)]) == 0
    out = capsys.readouterr().out
    assert out.count('"finding": "stalled"') == 1

"""Windowed health rules over metric histories: pure functions of (step, value) sequences."""

from __future__ import annotations

import math
from collections.abc import Sequence

from parsers.model import LogFinding

Series = Sequence[tuple[float, float]]
"""(step, value) pairs, oldest first."""


STALL_MIN_POINTS = 50
"""A loss history shorter than this gives no `stalled` verdict."""


def stalled(
    values: Series, min_points: int = STALL_MIN_POINTS, min_drop: float = 0.01
) -> LogFinding | None:
    """Loss not falling over the later half of the run so far.

    `values` spans the whole run (a chart series keeps its points spread evenly over it). The
    window is the later half of the steps the history covers; the mean of the window's later
    half must be at least `min_drop` (relative) below the mean of its earlier half, or the loss
    counts as stalled. Judged over half the run, a run that logs every step is seen over
    thousands of steps, not the last fifty, where its noise hides a slow but steady fall. A step
    counter that goes back (one per epoch) splits the points by order instead.

    Args:
        values: loss history of the whole run, oldest first.
        min_points: fewer finite points give no finding.
        min_drop: the relative fall that counts as progress.
    """
    points = [(x, v) for x, v in values if math.isfinite(v)]
    if len(points) < max(min_points, 8):
        return None
    xs = [x for x, _ in points]
    if all(b >= a for a, b in zip(xs, xs[1:], strict=False)):
        middle = (xs[0] + xs[-1]) / 2
        window = [p for p in points if p[0] >= middle]
        split = (window[0][0] + window[-1][0]) / 2
        before = [v for x, v in window if x < split]
        after = [v for x, v in window if x >= split]
    else:
        window = points[len(points) // 2 :]
        half = len(window) // 2
        before, after = [v for _, v in window[:half]], [v for _, v in window[half:]]
    if len(before) < 2 or len(after) < 2:
        return None
    mean_before, mean_after = _mean(before), _mean(after)
    if mean_before <= 0 or (mean_before - mean_after) / abs(mean_before) >= min_drop:
        return None
    return LogFinding(
        kind="stalled",
        evidence=(
            f"loss mean {mean_before:.4g} -> {mean_after:.4g} over steps "
            f"{window[0][0]:g}-{window[-1][0]:g}"
        ),
    )


def chance_level(
    val_acc: Series,
    num_classes: int | None = None,
    train_acc: Series | None = None,
    window: int = 3,
    tolerance: float = 1.5,
) -> LogFinding | None:
    """Validation accuracy stuck near chance (1/num_classes) while training accuracy improves.

    Accuracies may be fractions or percents: any value above 1, in either history, means
    percent. Without
    `num_classes` a binary problem is assumed only if nothing says otherwise, so pass it when
    known (0.10 % top-1 on 1000 classes is chance).

    Args:
        val_acc: validation accuracy history.
        num_classes: number of classes; chance is 1/num_classes.
        train_acc: training accuracy history; when given, it must have risen.
        window: how many recent validation points must all be near chance.
        tolerance: "near" means below `tolerance` x chance.
    """
    if len(val_acc) < window:
        return None
    classes = num_classes or 2
    everything = [*val_acc, *(train_acc or ())]
    scale = 100.0 if any(v > 1.0 for _, v in everything) else 1.0
    chance = scale / classes
    recent = [v for _, v in val_acc[-window:]]
    if not all(math.isfinite(v) and v <= chance * tolerance for v in recent):
        return None
    if train_acc is not None:
        if len(train_acc) < 2 or train_acc[-1][1] <= train_acc[0][1]:
            return None
    return LogFinding(
        kind="chance",
        evidence=(
            f"val acc {recent[-1]:.4g} at step {val_acc[-1][0]:g} is near chance "
            f"{chance:.4g} ({classes} classes) for {window} evaluations"
        ),
    )


def zero_metric_while_loss_falls(
    metric: Series, loss: Series, name: str = "val/map", min_drop: float = 0.05
) -> LogFinding | None:
    """MAP or mIoU exactly 0 at every evaluation while the training loss fell.

    That pattern is usually an evaluation bug (wrong annotation format, class ids, image
    sizes), not the model.

    Args:
        metric: the detection/segmentation metric history.
        loss: the training loss history over the same run.
        name: the metric's name, for the evidence text.
        min_drop: relative fall of the loss (first to last quarter means) that counts.
    """
    if len(metric) < 2 or len(loss) < 4:
        return None
    if any(v != 0.0 for _, v in metric):
        return None
    finite = [v for _, v in loss if math.isfinite(v)]
    quarter = max(1, len(finite) // 4)
    if len(finite) < 4:
        return None
    before, after = _mean(finite[:quarter]), _mean(finite[-quarter:])
    if before <= 0 or (before - after) / before < min_drop:
        return None
    return LogFinding(
        kind="zero_metric",
        evidence=(
            f"{name} = 0 at all {len(metric)} evaluations while loss fell "
            f"{before:.4g} -> {after:.4g}"
        ),
    )


def overfitting(train_acc: Series, val_acc: Series, gap: float = 0.2) -> LogFinding | None:
    """Training accuracy far above validation accuracy at the latest evaluation.

    Args:
        train_acc: training accuracy history (fractions or percents).
        val_acc: validation accuracy history, on the same scale.
        gap: the gap, as a fraction of the scale (0.2 = 20 points), that counts.
    """
    if not train_acc or not val_acc:
        return None
    train, val = train_acc[-1][1], val_acc[-1][1]
    scale = 100.0 if max(train, val) > 1.0 else 1.0
    if not (math.isfinite(train) and math.isfinite(val)) or train - val < gap * scale:
        return None
    return LogFinding(
        kind="overfitting",
        evidence=f"train acc {train:.4g} vs val acc {val:.4g} at step {val_acc[-1][0]:g}",
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)

"""Health of a task over time: which metric histories go to which rule, plus GPU-usage rules.

`judge` is the one entry point for the windowed rules: `gpuherd parse`, the dashboard's
`TaskTracker` and anything else that holds metric histories call it, so they cannot judge the
same log differently. The rules themselves are pure functions in `parsers.health`; which names
count as a loss or a validation score comes from `parsers.vocabulary`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from parsers import health, vocabulary
from parsers.model import LogFinding

ERROR_KINDS = frozenset({"oom", "traceback", "nan", "inf", "nccl", "cuda_error", "killed"})
"""Findings that mean the run is broken or about to be."""
LIVE_ONLY_KINDS = frozenset({"stalled"})
"""Trend findings that speak of a run still going: a run that ended (its command exited, its
writer is gone, or its log said so) has a flat loss because it converged, not because it
stalled."""
WINDOW_POINTS = 256
"""Most recent points of each metric the windowed rules see, in the dashboard and in `parse`."""
GPU_MIN_SAMPLES = 30
GPU_LOW_PCT = 30.0


@dataclass(frozen=True, slots=True)
class Finding:
    """One health finding shown on a task, with the evidence behind it."""

    kind: str
    """`nan`, `oom`, `traceback`, `download`, `stalled`, `chance`, `zero_metric`,
    `overfitting`, `gpu_low`, `gpu_swing`, ..."""
    severity: str
    """`error`, `warning` or `info`."""
    evidence: str
    """The log line or the values that support it."""
    line_no: int | None = None
    """Line of the current file generation, for findings read from the log."""
    count: int = 1
    """How many times the log showed it (findings from lines)."""
    first_seen_at: float | None = None
    last_seen_at: float | None = None


def severity_of(kind: str, rerun: bool) -> str:
    """How serious a finding of `kind` is; a download matters only on a rerun (cache miss)."""
    if kind in ERROR_KINDS:
        return "error"
    if kind == "download":
        return "warning" if rerun else "info"
    return "warning"


Series = Sequence[tuple[float, float]]
"""(x, value) points of one metric, oldest first: x is the step, epoch or index."""


class History(Protocol):
    """What `judge_histories` reads of one metric (a `gpuherd.tasks.series.MetricSeries`)."""

    @property
    def window(self) -> Series:
        """The most recent points at full resolution."""

    def points(self) -> Series:
        """Points spread evenly over the whole run, ending with the newest."""


def judge_histories(
    histories: Mapping[str, History], num_classes: int | None = None, ended: bool = False
) -> list[tuple[str, LogFinding]]:
    """`judge` over metric histories: the one call of the dashboard and of `gpuherd parse`."""
    windows = {name: h.window for name, h in histories.items()}
    runs = {name: h.points() for name, h in histories.items() if _whole_run(name)}
    return judge(windows, num_classes, runs=runs, ended=ended)


def judge(
    series: Mapping[str, Series],
    num_classes: int | None = None,
    *,
    runs: Mapping[str, Series] | None = None,
    ended: bool = False,
) -> list[tuple[str, LogFinding]]:
    """Findings that need a metric history, each with the metric whose history shows it.

    Stalled loss, validation accuracy near chance while training improves, mAP/mIoU exactly 0
    while the loss falls, train accuracy far above validation accuracy. Pass the last
    `WINDOW_POINTS` points of each metric that `wants` names; more change what the rules see.

    Args:
        series: recent points per metric name.
        num_classes: the class count of a classifier, when known (chance is 1/num_classes).
        runs: the losses' points over the whole run (chart series); the `stalled` rule judges
            the later half of the run. Without them it judges `series`.
        ended: the run has ended: no `LIVE_ONLY_KINDS` finding (a finished run's loss is flat
            at its end because it converged).
    """
    loss_name, loss = _loss(series)
    train_acc = _window(series, vocabulary.TRAIN_ACC)
    val_acc = _window(series, vocabulary.VAL_ACC)
    found: list[tuple[str, LogFinding | None]] = []
    if loss and not ended:
        whole_name, whole = _loss(runs) if runs else (loss_name, loss)
        found.append((whole_name, health.stalled(whole or loss)))
    if val_acc:
        found.append((vocabulary.VAL_ACC, _chance(val_acc, train_acc, loss, num_classes)))
        if train_acc:
            found.append((vocabulary.VAL_ACC, health.overfitting(train_acc, val_acc)))
    if loss:
        for name in vocabulary.ZERO_METRICS:
            metric = _window(series, name)
            if metric:
                found.append((name, health.zero_metric_while_loss_falls(metric, loss, name=name)))
    return [(name, f) for name, f in found if f is not None]


def wants(name: str) -> bool:
    """Whether `judge` reads the history of metric `name`."""
    return name in _JUDGED or vocabulary.is_loss_part(name)


def _whole_run(name: str) -> bool:
    return name in vocabulary.LOSS_NAMES or vocabulary.is_loss_part(name)


_JUDGED = frozenset(
    {*vocabulary.LOSS_NAMES, vocabulary.TRAIN_ACC, vocabulary.VAL_ACC, *vocabulary.ZERO_METRICS}
)


def gpu_findings(utils: Sequence[float]) -> list[LogFinding]:
    """Input-pipeline symptoms in GPU utilization samples taken while the task runs.

    Swinging: at least a fifth of the samples at or below 10 % and a fifth at or above 90 %
    (the GPU waits for data, then races through it). Low: a mean under 30 %.
    """
    values = [u for u in utils if math.isfinite(u)]
    if len(values) < GPU_MIN_SAMPLES:
        return []
    low = sum(1 for u in values if u <= 10.0) / len(values)
    high = sum(1 for u in values if u >= 90.0) / len(values)
    if low >= 0.2 and high >= 0.2:
        return [
            LogFinding(
                "gpu_swing",
                f"GPU utilization swings 0-100 %: {low:.0%} of the last "
                f"{len(values)} samples <= 10 %, {high:.0%} >= 90 % (input-bound?)",
            )
        ]
    mean = sum(values) / len(values)
    if mean < GPU_LOW_PCT:
        return [
            LogFinding(
                "gpu_low",
                f"GPU utilization averages {mean:.0f} % over the last "
                f"{len(values)} samples while the task logs progress",
            )
        ]
    return []


def _window(series: Mapping[str, Series], name: str) -> list[tuple[float, float]]:
    found = series.get(name)
    return list(found) if found else []


def _loss(series: Mapping[str, Series]) -> tuple[str, list[tuple[float, float]]]:
    """The training loss, or the sum of its terms where a log gives no total (YOLO)."""
    for name in vocabulary.LOSS_NAMES:
        found = _window(series, name)
        if found:
            return name, found
    parts = [
        (name, points)
        for name, points in series.items()
        if points and vocabulary.is_loss_part(name)
    ]
    if not parts:
        return vocabulary.TRAIN_LOSS, []
    # The terms are logged together, one of each per row: align them from the newest point.
    rows = zip(*(reversed(points) for _, points in parts), strict=False)
    summed = [(row[0][0], sum(v for _, v in row)) for row in rows]
    return parts[-1][0], summed[::-1]


def _chance(
    val_acc: list[tuple[float, float]],
    train_acc: list[tuple[float, float]],
    loss: list[tuple[float, float]],
    num_classes: int | None,
) -> LogFinding | None:
    if not train_acc and not _fell(loss):
        return None  # "while training improves": needs rising train acc or falling loss
    if num_classes is not None:
        return health.chance_level(val_acc, num_classes, train_acc or None)
    # Class count unknown: flag only what is near chance for 100+ classes (0-1.5 %), which is
    # broken for any classifier.
    found = health.chance_level(val_acc, 100, train_acc or None)
    if found is None:
        return None
    last = val_acc[-1]
    return LogFinding(
        "chance",
        f"val acc {last[1]:.4g} at step {last[0]:g} stays near zero "
        f"while training improves (class count unknown)",
    )


def _fell(loss: list[tuple[float, float]]) -> bool:
    finite = [v for _, v in loss if math.isfinite(v)]
    if len(finite) < 4:
        return False
    quarter = max(1, len(finite) // 4)
    before = sum(finite[:quarter]) / quarter
    after = sum(finite[-quarter:]) / quarter
    return after < before

"""Health of a task over time: the windowed rules of `parsers.health` plus GPU-usage rules."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuherd.tasks.series import MetricSeries
from parsers import health
from parsers.model import LogFinding

ERROR_KINDS = frozenset({"oom", "traceback", "nan", "inf", "nccl", "cuda_error", "killed"})
"""Findings that mean the run is broken or about to be."""
LOSS_NAMES = ("train/loss", "loss")
ZERO_METRICS = ("val/map", "val/map_50", "val/miou")
STALL_WINDOW = 50
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


def windowed_findings(series: Mapping[str, MetricSeries],
                      num_classes: int | None = None) -> list[LogFinding]:
    """Findings that need a metric history.

    Stalled loss, validation accuracy near chance while training improves, mAP/mIoU exactly 0
    while the loss falls, train accuracy far above validation accuracy.
    """
    loss = _window(series, *LOSS_NAMES)
    train_acc = _window(series, "train/acc")
    val_acc = _window(series, "val/acc")
    found: list[LogFinding | None] = [health.stalled(loss, window=STALL_WINDOW)] if loss else []
    if val_acc:
        found.append(_chance(val_acc, train_acc, loss, num_classes))
        if train_acc:
            found.append(health.overfitting(train_acc, val_acc))
    if loss:
        for name in ZERO_METRICS:
            metric = _window(series, name)
            if metric:
                found.append(health.zero_metric_while_loss_falls(metric, loss, name=name))
    return [f for f in found if f is not None]


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
        return [LogFinding("gpu_swing", f"GPU utilization swings 0-100 %: {low:.0%} of the last "
                           f"{len(values)} samples <= 10 %, {high:.0%} >= 90 % (input-bound?)")]
    mean = sum(values) / len(values)
    if mean < GPU_LOW_PCT:
        return [LogFinding("gpu_low", f"GPU utilization averages {mean:.0f} % over the last "
                           f"{len(values)} samples while the task logs progress")]
    return []


def _window(series: Mapping[str, MetricSeries], *names: str) -> list[tuple[float, float]]:
    for name in names:
        found = series.get(name)
        if found is not None and found.window:
            return list(found.window)
    return []


def _chance(val_acc: list[tuple[float, float]], train_acc: list[tuple[float, float]],
            loss: list[tuple[float, float]], num_classes: int | None) -> LogFinding | None:
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
    return LogFinding("chance", f"val acc {last[1]:.4g} at step {last[0]:g} stays near zero "
                                f"while training improves (class count unknown)")


def _fell(loss: list[tuple[float, float]]) -> bool:
    finite = [v for _, v in loss if math.isfinite(v)]
    if len(finite) < 4:
        return False
    quarter = max(1, len(finite) // 4)
    before = sum(finite[:quarter]) / quarter
    after = sum(finite[-quarter:]) / quarter
    return after < before

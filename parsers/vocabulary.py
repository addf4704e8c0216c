"""The metric vocabulary: what a normalised metric name means (kind, split, direction, unit)."""

from __future__ import annotations

from dataclasses import dataclass

TRAIN_LOSS = "train/loss"
LOSS = "loss"
"""A loss a log does not say the split of (a generic `loss=` key)."""
VAL_LOSS = "val/loss"
TRAIN_ACC = "train/acc"
VAL_ACC = "val/acc"
VAL_ACC_TOP5 = "val/acc_top5"
VAL_MAP = "val/map"
VAL_MAP_50 = "val/map_50"
VAL_MIOU = "val/miou"
VAL_PIXEL_ACC = "val/pixel_acc"
TRAIN_LOSS_RUN_MEAN = "train/loss_run_mean"
"""The training loss averaged over the whole run, as Hugging Face's Trainer reports it once at
the end (`train_loss` beside `train_runtime`): not a step's loss, so never the last one."""
LR = "lr"
ETA_S = "eta_s"
IT_S = "throughput/it_s"
SAMPLES_S = "throughput/samples_s"
TOKENS_S = "throughput/tokens_s"

LOSS_NAMES = (TRAIN_LOSS, LOSS)
"""The training loss of a task: the first of these it reports."""
LOSS_CHART = (TRAIN_LOSS, LOSS, VAL_LOSS)
"""Losses drawn on a loss chart, in this order."""
VALIDATION_NAMES = (VAL_ACC, VAL_MAP, VAL_MIOU, VAL_ACC_TOP5, VAL_MAP_50, VAL_PIXEL_ACC, VAL_LOSS)
"""The validation metric one row shows: the first of these the task reports."""
ZERO_METRICS = (VAL_MAP, VAL_MAP_50, VAL_MIOU)
"""Detection and segmentation scores that are never exactly 0 on a model that learns."""
THROUGHPUT_NAMES = (SAMPLES_S, TOKENS_S, IT_S)
"""Throughputs a log may report, most telling first."""
TOTAL_STEP_NAMES = ("total_steps", "max_steps")
KEY_METRICS = (
    TRAIN_LOSS,
    VAL_LOSS,
    TRAIN_ACC,
    VAL_ACC,
    VAL_ACC_TOP5,
    VAL_MAP,
    VAL_MAP_50,
    VAL_MIOU,
    VAL_PIXEL_ACC,
    LR,
)
"""Metrics the dashboard's one-row summary of a task shows, in this order."""
SUMMARY_METRICS = (
    TRAIN_LOSS,
    LOSS,
    VAL_LOSS,
    VAL_ACC,
    VAL_ACC_TOP5,
    VAL_MAP,
    VAL_MAP_50,
    VAL_MIOU,
    VAL_PIXEL_ACC,
    TRAIN_ACC,
)
"""Metrics whose first and last values a run summary and a verification note show."""
UNITS = {IT_S: "it/s", SAMPLES_S: "samples/s", TOKENS_S: "tokens/s", ETA_S: "s"}
"""The unit of a metric whose name says it; other metrics are unitless."""

LOWER_IS_BETTER = (
    "loss",
    "perplexity",
    "ppl",
    "error",
    "err",
    "wer",
    "cer",
    "mae",
    "mse",
    "rmse",
    "nll",
)
"""Words that, in the last part of a name, make a metric better when lower."""
HIGHER_IS_BETTER = (
    "acc",
    "map",
    "miou",
    "iou",
    "f1",
    "precision",
    "recall",
    "auc",
    "bleu",
    "rouge",
    "dice",
    "top1",
    "top5",
    "score",
)
"""Words that make it better when higher (checked after `LOWER_IS_BETTER`: `val/err_acc` is
an error)."""

_SPLITS = {"train": "train", "val": "val", "test": "test", "eval": "val"}


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """What a metric name says about its values."""

    kind: str
    """`loss`, `val_loss`, `accuracy`, `map`, `iou`, `throughput`, `lr` or `other`."""
    split: str | None
    """`train`, `val`, `test`, or `None` when the name does not say."""
    higher_is_better: bool | None
    """`None` when the name says neither (a learning rate, a step count)."""
    unit: str
    """`it/s`, `samples/s`, `tokens/s`, `s`, or empty."""


def classify(name: str) -> MetricInfo:
    """What `name` (as `parsers.text.metric_name` normalises it) measures."""
    head, _, leaf = name.lower().rpartition("/")
    split = _SPLITS.get(head.split("/", 1)[0]) if head else None
    better = direction(name)
    return MetricInfo(
        _kind(head, leaf, split),
        split,
        None if better is None else better == "max",
        UNITS.get(name, ""),
    )


def direction(name: str) -> str | None:
    """`min` for loss-like metrics, `max` for accuracy-like ones, `None` when neither."""
    leaf = name.lower().rsplit("/", 1)[-1]
    if any(word in leaf for word in LOWER_IS_BETTER):
        return "min"
    if any(word in leaf for word in HIGHER_IS_BETTER):
        return "max"
    return None


def is_loss(name: str) -> bool:
    """Whether a value of `name` is a loss (whose NaN or Inf is a finding).

    A best-so-far loss is not (`best_loss=inf`, `best/loss`): before the first evaluation it
    is printed as infinite, a placeholder, not a diverging run (simple-nmt's `Validation -
    loss=4.09 ppl=59.5 best_loss=inf`).
    """
    return "loss" in name and not name.startswith(("best_", "best/", "best "))


def is_loss_part(name: str) -> bool:
    """A training loss term logged instead of a total (YOLO's `train/box_loss`, ...)."""
    return name.startswith("train/") and name.endswith("loss") and name != TRAIN_LOSS


def _kind(head: str, leaf: str, split: str | None) -> str:
    if head == "throughput" or leaf == "steps_s":
        return "throughput"
    if leaf == LR or leaf.startswith("lr_"):
        return "lr"
    if "loss" in leaf:
        return "val_loss" if split == "val" else "loss"
    if "miou" in leaf or "iou" in leaf:
        return "iou"
    if "map" in leaf:
        return "map"
    if "acc" in leaf or leaf in ("top1", "top5"):
        return "accuracy"
    return "other"

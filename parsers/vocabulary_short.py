"""Short and framework-specific metric names, and units, with what each one means."""

from __future__ import annotations

import re

COUNTERS: dict[str, str] = {
    "step": "step",
    "steps": "step",
    "up.": "step",
    "up": "step",
    "iter": "step",
    "iteration": "step",
    "it": "step",
    "update": "step",
    "updates": "step",
    "s": "step",
    "num_updates": "step",
    "global_step": "step",
    "global step": "step",
    "epoch": "epoch",
    "ep.": "epoch",
    "ep": "epoch",
}
"""Field names that anchor a record: the step (`Up. 6500`, `s:400`) or the epoch (`Ep. 3`)."""

SHORT_NAMES: dict[str, str] = {
    "loss": "loss",
    "xent": "loss",
    "cost": "loss",
    "cross-entropy": "loss",
    "ce": "loss",
    "nll": "loss",
    "batch loss": "loss",
    "avg.loss": "loss",
    "avg loss": "loss",
    "loss/word": "loss",
    "trl": "loss",
    "tel": "val/loss",
    "total loss": "loss",
    "ppl": "ppl",
    "perplexity": "ppl",
    "acc": "acc",
    "accuracy": "acc",
    "bleu": "bleu",
    "bleu4": "bleu",
    "score": "score",
    "reward": "reward",
    "reward score": "reward",
    "mlogloss": "mlogloss",
    "logloss": "logloss",
    "auc": "auc",
    "rmse": "rmse",
    "lr": "lr",
    "l.r.": "lr",
    "learning rate": "lr",
    "gnorm": "grad_norm",
    "norm": "grad_norm",
    "grad norm": "grad_norm",
    "tokens per sec": "throughput/tokens_s",
    "tok/s": "throughput/tokens_s",
    "tps": "throughput/tokens_s",
    "words/s": "throughput/tokens_s",
    "words/sec": "throughput/tokens_s",
    "sps": "throughput/samples_s",
    "wps": "throughput/tokens_s",
    "ups": "throughput/it_s",
    "ips": "throughput/samples_s",
    "hmean": "hmean",
    "learn": "loss",
}
"""Names a log prints for a metric, lower case, without their split: `xent` is a loss."""

SCALED_NAMES: dict[str, tuple[str, float]] = {"mtps": ("throughput/tokens_s", 1e6)}
"""Names of a metric in a larger unit, and the factor to its own (`mtps`: million tokens/s)."""

SPLIT_FREE = frozenset({"lr", "grad_norm"})
"""Bases that belong to no split."""

UNIT_NAMES: dict[str, str] = {
    "words/s": "throughput/tokens_s",
    "tok/s": "throughput/tokens_s",
    "tokens/s": "throughput/tokens_s",
    "words/sec": "throughput/tokens_s",
    "samples/s": "throughput/samples_s",
    "sents/s": "throughput/samples_s",
    "it/s": "throughput/it_s",
    "ms/step": "step_time_ms",
    "ms/iter": "step_time_ms",
    "ms/it": "step_time_ms",
}
"""A unit after a number that names the metric on its own (`812.5 words/s`)."""

METRIC_WORDS = (
    "loss",
    "acc",
    "ppl",
    "perplexity",
    "auc",
    "logloss",
    "rmse",
    "mae",
    "mse",
    "error",
    "bleu",
    "f1",
    "precision",
    "recall",
    "dice",
    "iou",
    "reward",
    "score",
    "wer",
    "cer",
    "hmean",
)
"""Words that make a field name a metric (`binary_logloss`, `mlogloss`, `valid_dice`)."""

EVALUATION_ONLY = frozenset({"precision", "recall", "hmean", "f1", "bleu"})
"""Scores a run computes on held-out data only: without a split of their own, `val`."""

_NOT_METRIC = re.compile(
    r"(?:^|[\s_])(?:scale|size)$|^(?:num|number|consumed)[\s_]|^init|^(?:wpb|bsz|clip|oom|wall"
    r"|train_wall|gb_free|total|remaining|elapsed)$"
)


def is_count_or_setting(low: str) -> bool:
    """Whether a lower-case field name is a count or a setting, not a metric.

    `loss scale` and `loss_scale` (mixed precision's), `global batch size`, `consumed samples`,
    `number of skipped iterations`, `num zeros`, and fairseq's words per batch (`wpb`), batch
    size (`bsz`), clipped share (`clip`), out-of-memory count (`oom`) and wall clocks
    (CatBoost's `total: 1.2s  remaining: 19m 56s`); a starting value is a setting
    (LightGBM's `initscore=0.003864`, `init_lr`).
    """
    return _NOT_METRIC.search(low) is not None


_SPLIT = re.compile(
    r"^(train|training|trn|valid|validation|val|dev|eval|evaluation|test)(?:_\d+)?[\s_\-/]+(.+)$"
)
_SPLITS = {
    "train": "train",
    "training": "train",
    "trn": "train",
    "valid": "val",
    "validation": "val",
    "val": "val",
    "dev": "val",
    "eval": "val",
    "evaluation": "val",
    "test": "test",
}
_SILENT = ("average ", "avg ", "mean ", "batch ", "total ")


def split_and_base(low: str, default: str) -> tuple[str, str]:
    """(split, the rest) of a lower-case field name (`valid_0 auc`, `test-mlogloss`).

    The split is `default` when the name says none. `Average`, `batch` and `total` before a
    name change nothing (`Batch Loss` is the loss).
    """
    match = _SPLIT.match(low)
    split, rest = (default, low) if match is None else (_SPLITS[match[1]], match[2])
    if match is not None and rest.startswith("s "):  # `valid_0's auc`, its quote a blank
        rest = rest[2:]
    if rest.endswith("_train"):
        split, rest = "train", rest[:-6]
    for word in _SILENT:
        if rest.startswith(word) and rest not in SHORT_NAMES:
            rest = rest[len(word) :]
    return split, rest

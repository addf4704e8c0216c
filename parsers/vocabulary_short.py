"""Short and framework-specific metric names, and units, with what each one means."""

from __future__ import annotations

COUNTERS: dict[str, str] = {
    "step": "step", "steps": "step", "up.": "step", "up": "step", "iter": "step",
    "iteration": "step", "it": "step", "update": "step", "updates": "step", "s": "step",
    "epoch": "epoch", "ep.": "epoch", "ep": "epoch",
}
"""Field names that anchor a record: the step (`Up. 6500`, `s:400`) or the epoch (`Ep. 3`)."""

SHORT_NAMES: dict[str, str] = {
    "loss": "loss", "xent": "loss", "cost": "loss", "cross-entropy": "loss", "ce": "loss",
    "nll": "loss", "batch loss": "loss", "avg.loss": "loss", "avg loss": "loss",
    "loss/word": "loss", "loss_train": "loss", "trl": "loss", "total loss": "loss",
    "ppl": "ppl", "perplexity": "ppl",
    "acc": "acc", "accuracy": "acc",
    "bleu": "bleu", "bleu4": "bleu", "score": "score",
    "mlogloss": "mlogloss", "logloss": "logloss", "auc": "auc", "rmse": "rmse",
    "lr": "lr", "l.r.": "lr", "learning rate": "lr",
    "gnorm": "grad_norm", "norm": "grad_norm", "grad norm": "grad_norm",
    "tokens per sec": "throughput/tokens_s", "tok/s": "throughput/tokens_s",
    "tps": "throughput/tokens_s", "words/s": "throughput/tokens_s",
    "words/sec": "throughput/tokens_s", "sps": "throughput/samples_s",
}
"""Names a log prints for a metric, lower case, without their split: `xent` is a loss."""

SPLIT_FREE = frozenset({"lr", "grad_norm"})
"""Bases that belong to no split."""

UNIT_NAMES: dict[str, str] = {
    "words/s": "throughput/tokens_s", "tok/s": "throughput/tokens_s",
    "tokens/s": "throughput/tokens_s", "words/sec": "throughput/tokens_s",
    "samples/s": "throughput/samples_s", "sents/s": "throughput/samples_s",
    "it/s": "throughput/it_s",
}
"""A unit after a number that names the metric on its own (`812.5 words/s`)."""

_SPLIT_WORDS = (("train", "train"), ("training", "train"), ("valid", "val"),
                ("validation", "val"), ("val", "val"), ("dev", "val"), ("eval", "val"),
                ("test", "test"))


def split_of(low: str, default: str) -> str:
    """The split a field name says (`valid loss`, `test-mlogloss`), else `default`."""
    for word, split in _SPLIT_WORDS:
        if low.startswith(word) and low[len(word):len(word) + 1] in (" ", "-", "_"):
            return split
    if low.endswith("_train"):
        return "train"
    return default

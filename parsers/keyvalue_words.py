"""Hand-written metric lines that name counters and values in words, for the generic parser."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.text import STANDARD_NAMES, metric_name
from parsers.values import to_epoch, to_step

MAX_PROSE_WORDS = 4
"""Words outside the pairs a `key value` line may have (`| end of epoch 1 | ...`)."""

# `Epoch [1/3]`, `Epoch: [1/237]`, `Iter:[0/35]`, `Step [100/600]`: counters in brackets, as
# custom loops print them (the segmentation trainers of HRNet's lineage, the PyTorch
# tutorials). The count before the `/` is the counter, as printed (a step within the epoch).
_BRACKETED = re.compile(
    r"\b(?:([Ee]poch|EPOCH)|[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER|[Bb]atch)\s*:?\s*"
    r"\[\s*(\d+)\s*(?:/\s*\d+\s*)?\]")
# `[1,  2000] loss: 1.925`: the PyTorch CIFAR-10 tutorial's (epoch, mini-batch) at the start
_LEADING_PAIR = re.compile(r"\s*\[\s*(\d+),\s*(\d+)\s*\]")
# `Epoch 3 | ...`, `Epoch 1: 100%|...`; not `epoch 12:30` (a time) or `epoch 3 = ...`
_EPOCH_WORD = re.compile(r"\b[Ee]poch:?\s+\[?(\d+)\b(?!\s*=|:\S|\s+:)")
_LONE_NUMBER = re.compile(r"\[([-+]?\d[\d.eE+-]*)\]")
"""`lr: [0.00498]`: a learning rate printed as the one-item list of its parameter groups."""


def counters_in_words(line: str) -> tuple[int | None, float | None]:
    """The step and epoch a line names outside `key: value` pairs.

    `Epoch [1/3], Step [100/600]`, `Epoch: [0/237] Iter:[33/35]`, `[1,  2000] loss: ...`
    (epoch, then mini-batch), `Epoch 3 | loss: ...`; (None, None) when it names neither.
    """
    step: int | None = None
    epoch: float | None = None
    if "[" in line:
        lead = _LEADING_PAIR.match(line)
        if lead is not None:
            return to_step(int(lead[2])), to_epoch(float(lead[1]))
        for match in _BRACKETED.finditer(line):
            if match[1] is not None:
                epoch = to_epoch(float(match[2])) if epoch is None else epoch
            elif step is None:
                step = to_step(int(match[2]))
    if epoch is None and "poch" in line:
        word = _EPOCH_WORD.search(line)
        epoch = None if word is None else to_epoch(float(word[1]))
    return step, epoch


def blank_counters(body: str) -> str:
    """`body` with its bracketed counters blanked and one-item lists unwrapped.

    The result is as long as `body` (blanks stand in), so places in it are places in `body`;
    the counters no longer count as words of prose, and `lr: [0.005]` reads as `lr: 0.005`.
    """
    if "[" not in body:
        return body
    body = _LEADING_PAIR.sub(_blanks, body, count=1)
    body = _BRACKETED.sub(_blanks, body)
    return _LONE_NUMBER.sub(lambda match: f" {match[1]} ", body)


def _blanks(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


_SPLIT_WORDS = {"train": "train", "training": "train", "val": "val", "valid": "val",
                "validation": "val", "eval": "val", "test": "test"}
_SILENT_WORDS = frozenset({"average", "avg", "mean"})
"""Words before a metric that do not change it: `Average loss` is the loss of its line."""
# A key of one word, or two where the first is a split (`valid loss`) or `average`; a blank
# (no `:` or `=`); a number, or a count of a total (`epoch 1/3`), ended by a blank, `,`, `|`
# or the end of the line. Cases spelled out rather than re.IGNORECASE, which is slower.
_SPACED = re.compile(
    r"(?<![\w/@.-])(?:([Tt]rain(?:ing)?|[Vv]al(?:id(?:ation)?)?|[Ee]val|[Tt]est|[Aa]verage|"
    r"[Aa]vg|[Mm]ean)[ _])?([A-Za-z][\w/@.-]*)[ \t]+"
    r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|[nN]a[nN]|[iI]nf)(?:/\s*(\d+))?(?![\w./]|:\S)")
_BATCHES = re.compile(r"(?<![\w.])(\d+)/\s*\d+ (?:batches|steps|iters|iterations)\b")
"""`200/ 2983 batches` of PyTorch's `word_language_model` example: the batch in the epoch."""
_COUNTER_WORDS = {"step": "step", "iter": "step", "it": "step", "iteration": "step",
                  "batch": "step", "epoch": "epoch", "ep": "epoch"}
_WORD = re.compile(r"(?<!\S)(?=\S*?[A-Za-z]{2})\S+")
_EXTRA_NAMES = {"ms/batch": "throughput/it_s"}
"""Keys known only in this shape of line: `ms/batch 45.68` is a rate in milliseconds."""
SCORE_WORDS = ("loss", "acc", "ppl", "miou", "map")
"""A `key value` line is a metric line when one of its values is one of these."""


def parse_spaced_line(line: str, split: str | None = None) -> LogMetric | None:
    """Parse `key value` pairs written without `:` or `=`, as hand-written loops print them.

    `step 100 | loss 2.31 | lr 3e-4`, `it 400 loss 1.8`, `Epoch 2: train loss 1.6, val loss
    1.7`, PyTorch's `| epoch 1 | 200/ 2983 batches | lr 20.00 | ms/batch 45.68 | loss 7.63 |
    ppl 2050.44` and `| end of epoch 1 | time: 40.1s | valid loss 5.56 | valid ppl 259.02`.
    Only keys `metric_name` knows count; a line is a metric line when one of its values is a
    loss, accuracy, perplexity or score, and it has at most `MAX_PROSE_WORDS` other words.

    Args:
        line: a normalised line.
        split: the split bare keys belong to; by default `val` on a line that opens with
            an evaluation word (`opens_evaluation`), else `train`.
    """
    if not ("oss" in line or "cc" in line or "ppl" in line or "erplex" in line
            or "IoU" in line or "mAP" in line):  # no score word: no regex
        return None
    if split is None:
        split = "val" if opens_evaluation(line) else "train"
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    scored = False
    rest: list[str] = []
    start = 0
    for match in _SPACED.finditer(line):
        name, count = _spaced_name(match[1], match[2], split)
        if name is None:
            continue
        rest.append(line[start:match.start()])
        start = match.end()
        number = float(match[3])
        if count == "step":
            step = to_step(number)
        elif count == "epoch":
            epoch = to_epoch(number)
        else:
            if match[4] is not None:  # `accuracy 9820/10000`
                number = number / float(match[4]) if float(match[4]) else number
            if name == "throughput/it_s":
                if number <= 0:
                    continue
                number = 1000.0 / number
            values.append((name, number))
            scored = scored or any(word in name.lower() for word in SCORE_WORDS)
    if not scored:
        return None
    rest.append(line[start:])
    text = " ".join(rest)
    if step is None and "/" in text:
        batches = _BATCHES.search(text)
        if batches is not None:
            step = to_step(int(batches[1]))
            text = text.replace(batches[0], " ")
    if len(text.split()) > MAX_PROSE_WORDS and len(_WORD.findall(text)) > MAX_PROSE_WORDS:
        return None
    return LogMetric(tuple(values), step, epoch)


def _spaced_name(first: str | None, key: str, split: str) -> tuple[str | None, str | None]:
    """(metric name, counter) of a `key value` key; (None, None) for a key it does not know."""
    low = key.lower()
    if first is None or first.lower() in _SILENT_WORDS:
        counter = _COUNTER_WORDS.get(low)
        if counter is not None:
            return counter, counter
        name = _EXTRA_NAMES.get(low) or metric_name(key, split)
    else:
        name = metric_name(f"{_SPLIT_WORDS[first.lower()]}_{key}", split)
    return (name, None) if name in STANDARD_NAMES else (None, None)


_BARE_SCORES = frozenset({"loss", "Loss", "LOSS", "acc", "Acc", "accuracy", "Accuracy"})
_NOT_NAMING = frozenset({"INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", "TRACE", "Average",
                         "average", "Avg", "avg", "Mean", "mean"})
"""Words before a bare `loss` that do not name it: log levels, and `Average loss` is the loss."""


def compound_keys(texts: list[str], keys: list[str]) -> list[str]:
    """The keys, a bare `loss` or `acc` joined to the word just before it.

    `Loss: 0.64, ..., Semantic loss: 0.41, BCE loss: 0.06` reports its total and its parts
    (`Semantic_loss`); `Train loss: 0.5` is `Train_loss`, the training loss.
    """
    if _BARE_SCORES.isdisjoint(keys):
        return keys
    keys = list(keys)
    for i, key in enumerate(keys):
        before = texts[i]
        if key in _BARE_SCORES and before[-2:-1].isalpha() and before[-1] == " ":
            word = before.rsplit(None, 1)[-1]
            if word.isalpha() and word.isascii() and word not in _NOT_NAMING:
                keys[i] = f"{word}_{key}"
    return keys


_EVAL_STARTS = ("Test", "test", "Val", "val", "Eval", "eval", "TEST", "VAL", "EVAL")


def opens_evaluation(line: str) -> bool:
    """Whether a line opens with an evaluation word (`Test set: Average loss: ...`)."""
    return line.lstrip(" \t=-*#~|[").startswith(_EVAL_STARTS)

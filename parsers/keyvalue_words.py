"""Hand-written metric lines that name counters and values in words, for the generic parser."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.text import STANDARD_NAMES, metric_name
from parsers.values import to_epoch, to_step

MAX_PROSE_WORDS = 4
"""Words outside the pairs a `key value` line may have (`| end of epoch 1 | ...`)."""

# `Epoch [1/3]`, `Epoch: [1/237]`, `ep: [1/10]`, `Iter:[0/35]`, `Step [100/600]`: counters in
# brackets, as custom loops print them (the segmentation trainers of HRNet's lineage, the
# PyTorch tutorials). The count before the `/` is the counter, as printed (a step within the
# epoch).
_BRACKET_COUNT = re.compile(r"\[\s*(\d+)\s*(?:/\s*\d+\s*)?\]")
# the counter's name, right before its bracket (searched in a few characters only)
_COUNTER_BEFORE = re.compile(
    r"(?<![\w])(?:([Ee]poch|EPOCH|[Ee]p)|[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER|[Bb]atch)\s*:?\s*$"
)
# `[1,  2000] loss: 1.925`: the PyTorch CIFAR-10 tutorial's (epoch, mini-batch) at the start
_LEADING_PAIR = re.compile(r"\s*\[\s*(\d+),\s*(\d+)\s*\]")
# `Epoch 3 | ...`, `Epoch 1: 100%|...`; not `epoch 12:30` (a time) or `epoch 3 = ...`
# (a character class first and the word boundary after it: the engine scans for `E` or `e`)
_EPOCH_WORD = re.compile(r"[Ee](?<![\w].)poch:?\s+\[?(\d+)\b(?!\s*=|:\S|\s+:)")
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
        for is_epoch, count, _, _ in _bracketed(line):
            if is_epoch:
                epoch = to_epoch(float(count)) if epoch is None else epoch
            elif step is None:
                step = to_step(int(count))
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
    spans = [(start, end) for _, _, start, end in _bracketed(body)]
    for start, end in spans:
        body = body[:start] + " " * (end - start) + body[end:]
    return _LONE_NUMBER.sub(lambda match: f" {match[1]} ", body)


def _blanks(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


def _bracketed(text: str) -> list[tuple[bool, str, int, int]]:
    """(an epoch, the count, start, end) of each counter in brackets, with its name."""
    found = []
    for match in _BRACKET_COUNT.finditer(text):
        name = _COUNTER_BEFORE.search(text, max(0, match.start() - 16), match.start())
        if name is not None:
            found.append((name[1] is not None, match[1], name.start(), match.end()))
    return found


_SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "eval": "val",
    "test": "test",
}
_SILENT_WORDS = frozenset({"average", "avg", "mean"})
"""Words before a metric that do not change it: `Average loss` is the loss of its line."""
# A key of one word or two (`valid loss`), a blank (no `:` or `=`), a number or a count of a
# total (`epoch 1/3`), ended by a blank, `,`, `|` or the end of the line. The regex opens with
# a character class and looks behind after it, so the engine finds candidates by a fast scan.
_SPACED = re.compile(
    r"([A-Za-z](?<![\w/@.-].)[\w/@.-]*+)(?: ([A-Za-z][\w/@.-]*+))?[ \t]+"
    r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|[nN]a[nN]|[iI]nf)(?:/\s*(\d+))?(?![\w./]|:\S)"
)
_BATCHES = re.compile(r"(?<![\w.])(\d+)/\s*\d+ (?:batches|steps|iters|iterations)\b")
"""`200/ 2983 batches` of PyTorch's `word_language_model` example: the batch in the epoch."""
_COUNTER_WORDS = {
    "step": "step",
    "iter": "step",
    "it": "step",
    "iteration": "step",
    "batch": "step",
    "epoch": "epoch",
    "ep": "epoch",
}
_WORD = re.compile(r"(?<!\S)(?=\S*?[A-Za-z]{2})\S+")
_EXTRA_NAMES = {"ms/batch": "throughput/it_s"}
"""Keys known only in this shape of line: `ms/batch 45.68` is a rate in milliseconds."""
SCORE_WORDS = ("loss", "acc", "ppl", "miou", "map")
_SCORED = re.compile(r"(?:oss|cc|uracy|ppl|lexity|IoU|iou|mAP)[ \t]+[-+.]?[\dni]")
"""A score word, blanks and a number: what every `key value` metric line holds."""
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
    # substring tests run at C speed and rule out almost every other line before any regex
    if (
        not (
            "oss" in line
            or "cc" in line
            or "ppl" in line
            or "lexity" in line
            or "IoU" in line
            or "iou" in line
            or "mAP" in line
        )
        or _SCORED.search(line) is None
    ):
        return None
    if split is None:
        split = "val" if opens_evaluation(line) else "train"
    # A log prints one shape of `key value` line over and over: what the regex found in a
    # shape is kept as a recipe (which number is what), unless a key holds a digit (`top1`
    # and `top5` are one shape), and lines of that shape are read by it.
    shape = (line.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO), split)
    recipe = _RECIPES.get(shape, _UNKNOWN)
    if recipe is _UNKNOWN:
        recipe = _recipe(line, split)
        if _KEY_DIGIT.search(line) is None:
            if len(_RECIPES) >= _RECIPES_SIZE:
                _RECIPES.clear()
            _RECIPES[shape] = recipe
    return None if recipe is None else _cook(line, recipe)


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_KEY_DIGIT = re.compile(r"[A-Za-z_]\d")
_UNKNOWN = object()
_RECIPES: dict[tuple[bytes, str], object] = {}
"""Per line shape and split, its recipe or None (no metric line); bounded."""
_RECIPES_SIZE = 1024
VALUE, STEP, EPOCH, MS_PER_BATCH = range(4)
Recipe = tuple[tuple[int, str, int, int, int, int], ...]
"""(what, metric name, where the number is, where its total is or (0, 0)) per number."""


def _recipe(line: str, split: str) -> Recipe | None:
    """What each number of a `key value` line is; None when the line is no metric line."""
    recipe: list[tuple[int, str, int, int, int, int]] = []
    scored = False
    rest: list[str] = []
    start = 0
    for match in _SPACED.finditer(line):
        name, count = _spaced_name(match[1], match[2], split)
        if name is None:
            continue
        rest.append(line[start : match.start()])
        start = match.end()
        total = match.span(4) if match[4] is not None else (0, 0)
        if count is not None:
            recipe.append((STEP if count == "step" else EPOCH, name, *match.span(3), 0, 0))
        else:
            kind = MS_PER_BATCH if name == "throughput/it_s" else VALUE
            recipe.append((kind, name, *match.span(3), *total))
            scored = scored or any(word in name.lower() for word in SCORE_WORDS)
    if not scored:
        return None
    rest.append(line[start:])
    text = " ".join(rest)
    if "/" in text and all(kind != STEP for kind, *_ in recipe):
        batches = _BATCHES.search(line)
        if batches is not None:
            recipe.append((STEP, "step", *batches.span(1), 0, 0))
            text = text.replace(batches[0], " ")
    if len(text.split()) > MAX_PROSE_WORDS and len(_WORD.findall(text)) > MAX_PROSE_WORDS:
        return None
    return tuple(recipe)


def _cook(line: str, recipe: object) -> LogMetric:
    """The metric of a line by its shape's recipe."""
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    for kind, name, start, end, total_start, total_end in recipe:  # type: ignore[attr-defined]
        number = float(line[start:end])
        if kind == STEP:
            step = to_step(number)
        elif kind == EPOCH:
            epoch = to_epoch(number)
        else:
            if total_end:  # `accuracy 9820/10000`
                total = float(line[total_start:total_end])
                number = number / total if total else number
            if kind == MS_PER_BATCH:
                if number <= 0:
                    continue
                number = 1000.0 / number
            values.append((name, number))
    return LogMetric(tuple(values), step, epoch)


def _spaced_name(first: str, second: str | None, split: str) -> tuple[str | None, str | None]:
    """(metric name, counter) of a `key value` key of one or two words, or (None, None).

    (None, None) is a key the vocabulary does not know. Of two words, a split (`valid loss`)
    or `Average` before a key is part of it; before a counter, a word is prose (`end of epoch
    1`); otherwise the two name a metric of their own (`Semantic loss` is no `loss`).
    """
    key = first
    if second is not None:
        low_first = first.lower()
        if low_first in _SPLIT_WORDS:
            name = metric_name(f"{_SPLIT_WORDS[low_first]}_{second}", split)
            return (name, None) if name in STANDARD_NAMES else (None, None)
        if low_first not in _SILENT_WORDS and second.lower() not in _COUNTER_WORDS:
            return None, None
        key = second
    low = key.lower()
    counter = _COUNTER_WORDS.get(low)
    if counter is not None:
        return counter, counter
    name = _EXTRA_NAMES.get(low) or metric_name(key, split)
    return (name, None) if name in STANDARD_NAMES else (None, None)


_BARE_SCORES = frozenset(
    {
        "loss",
        "Loss",
        "LOSS",
        "acc",
        "Acc",
        "accuracy",
        "Accuracy",
        "perplexity",
        "Perplexity",
        "ppl",
    }
)
_NOT_NAMING = frozenset(
    {
        "INFO",
        "DEBUG",
        "WARNING",
        "ERROR",
        "CRITICAL",
        "TRACE",
        "Average",
        "average",
        "Avg",
        "avg",
        "Mean",
        "mean",
    }
)
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
# the word itself, not a key that starts with it (`val_loss=...`, `test/acc: ...`)
_EVAL_WORD = re.compile(
    r"(?:test|val|eval)(?:id|idation|idating|uation|uating|ing)?(?: set)?(?=[\s:|\]])",
    re.IGNORECASE,
)


def opens_evaluation(line: str) -> bool:
    """Whether a line opens with an evaluation word (`Test set: Average loss: ...`)."""
    line = line.lstrip(" \t=-*#~|[")
    return line.startswith(_EVAL_STARTS) and _EVAL_WORD.match(line) is not None

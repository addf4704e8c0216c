"""Generic `key: value` / `key=value` lines, the fallback format (JSON lines: `json_records`)."""

from __future__ import annotations

import operator
import re

from parsers.json_records import EPOCH_KEYS, STEP_KEYS
from parsers.json_records import parse_jsonl_line as parse_jsonl_line  # its former home
from parsers.keyvalue_plans import (
    DIGITS_AS_ZERO,
    PLAN_CACHE_SIZE,
    LinePlan,
    LinePlans,
    make_plan,
    read_count,
    read_number,
)
from parsers.keyvalue_words import (
    blank_counters,
    compound_keys,
    counters_in_words,
    opens_evaluation,
    parse_spaced_line,
)
from parsers.mapping_line import parse_mapping_line
from parsers.model import LogMetric
from parsers.records import AS_READ, RECORD_ACTIONS, RECORD_RECIPES, read_better
from parsers.text import (
    STANDARD_NAMES,
    local_timestamp,
    metric_name,
    normalise_line,
    parse_duration,
    parse_number,
)
from parsers.values import to_epoch, to_step

# Cases spelled out rather than re.IGNORECASE, which makes every position slower to try.
# Thousands separators may be inside a number, never at its end: `Step: 200, Loss: 2.1` is 200.
_NUM = (
    r"[-+]?(?:\d(?:[\d,]*\d)?\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
    r"|[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
)
# A key starts after a character that cannot be part of one. The lookbehind comes after the
# key's first letter, so the regex opens with a character class, which the engine finds by a
# fast scan instead of trying every position; a key (and the spaces after it) never gives back
# characters to the separator, which none of them can start (`*+`). A `:` takes a blank after
# it, or a digit (`Acc:0.93`); a value may be a count of a total (`Accuracy: 9820/10000`). A
# progress bar's percentage is no value (`Map: 100%|███| 500/500`: a dataset map, not a mAP).
_PAIR = re.compile(
    r"([A-Za-z_](?<![\w/@.()-].)[\w/@.()-]*+)\s*+(?:=\s*|:\s+|:(?=\d))"
    rf"('?{_NUM}'?%?|\d+:\d\d(?::\d\d)?|\d+/\d+)(?![\w.:/]|%\||(?<=%)\|)"
)
_ISO_TS = re.compile(r"^\[?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?")
_STAMP_STARTS = frozenset("0123456789[")
_RULE_CHARS = " \t=-*#~"
_RULE_STARTS = frozenset("=-*#~")
_LEADING_RULE = re.compile(r"[ \t=\-*#~]*")
_ETA_KEYS = frozenset({"eta", "eta_s", "remaining"})
_COUNTERS = {
    **dict.fromkeys(STEP_KEYS, "step"),
    **dict.fromkeys(EPOCH_KEYS, "epoch"),
    **dict.fromkeys(_ETA_KEYS, "eta"),
}
# Lines that are never metrics whatever pairs they hold: code in backticks, Python warnings
# (`file.py:12: UserWarning: ...`, Lightning's `rank_zero_warn`), warning levels and tips.
_NOT_METRICS = re.compile(
    r"`|\.py:\d+: |Warning\b|\bWARN(?:ING)?\b|\bwarning\b|\bTip:"
    r"|[A-Za-z]\((?:[a-z_]+=|\d+, )"
)
"""Also a model printout: a module built with keyword arguments (`Linear(in_features=512,
...)`, `Dropout(p=0.1)`, `Conv2d(3, 64, ...)`)."""
# A whitespace-separated token with two letters in a row: a word of prose (`Trainable`,
# `cores`, `INFO`), as opposed to numbers, units and punctuation. Linear on long tokens.
_WORD = re.compile(r"(?<!\S)(?=\S*?[A-Za-z]{2})\S+")
_CONFIG_KEY = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
"""`LOCAL_RANK`, `CUDA_VISIBLE_DEVICES`: environment settings, not metrics."""
MAX_PROSE_WORDS = 4
"""Words outside the pairs a line may have when one of its keys is a known metric
(`2024-... INFO step=5 loss=...`, `Epoch 3 | val_loss: ...`, `Test set: Average loss: ...`)."""


def parse_generic_line(line: str) -> LogMetric | None:
    """Parse `key: value` or `key=value` pairs with numeric values on a metric-shaped line.

    Counters such as `step`, `iter` and `epoch` become the metric's step and epoch; an ISO
    timestamp at the start of the line becomes `taken_at` (local time when it has no zone).
    Prose is not a metric line: a line with more than `MAX_PROSE_WORDS` words outside its
    pairs, or with any word when none of its keys is a known metric (`Modules in train mode:
    17`, `TPU available: False, using: 0 TPU cores`), gives nothing, and so do warnings, tips
    and lines quoting code in backticks (`` `max_epochs=6` reached ``).

    A printed mapping (`{'loss': 0.5, 'epoch': 1.0}`, a JSON object after a logging prefix)
    is read as a record: see `parsers.mapping_line`.
    """
    return parse_normalised_line(normalise_line(line))


def parse_normalised_line(line: str) -> LogMetric | None:
    """`parse_generic_line` of a line `normalise_line` has made what a person sees."""
    shape = b""
    if ":" in line or "=" in line:
        # the most common line of all: a shape read before by its plan, as it was read
        shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
        ready = _PLANS.ready.get(shape)
        if ready is not None:
            try:
                metric = ready.replay(line)
            except (ValueError, ArithmeticError):
                metric = None  # the long way below raises the parser's own error
            if metric is not None:
                return metric
    if "{" in line and ("{'" in line or '{"' in line):  # one scan for the lines without
        mapped = _mapping_metric(line)
        if mapped is not None:
            return mapped
    if not shape:
        metric = parse_spaced_line(line)
        if metric is None and not _may_be_record(line):
            return None  # prose: no field separator a record could have
        shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    else:
        metric = None
        if ":" in line:  # its first key may come back: records run together
            redrawn = last_redraw(line)
            if redrawn is not line:
                line = redrawn
                shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    if metric is None:
        # A log repeats the shapes of its other lines (banners, chores, tables of words): a
        # shape that gave nothing gives nothing again, without the pairs and records read.
        if shape not in _PLANS.plans and _GAVE_NOTHING.holds(line, shape):
            return None  # (a planned shape gives a metric: no need to ask)
        if ":" in line or "=" in line:
            metric = _keyvalue_metric(line, shape)
    # the common outcomes without a call: a metric line read as it is, a shape of no record
    if metric is not None:
        if RECORD_ACTIONS.get(shape) == AS_READ:
            _PLANS.keep_ready(shape)
            return metric
    elif shape in RECORD_RECIPES and RECORD_RECIPES[shape] is None:
        _GAVE_NOTHING.add(line, shape)
        return None
    better = read_better(line, metric, shape)
    if better is None:
        _GAVE_NOTHING.add(line, shape)
    return better


_COUNTER_VALUE = re.compile(
    r"(?i)(?<![a-z])(?:steps?|up\.?|iter(?:ation)?|it|updates?|s|num_updates|global[_ ]step"
    r"|epoch|ep\.?|batch)\s*[:=]?\s*[-+]?[\d.]"
)
"""A counter and its value (`step=5`, `Epoch: 3`, `s:400`): see `ShapesWithoutMetric.add`."""


class ShapesWithoutMetric:
    """Line shapes that gave no metric (bounded: emptied when full).

    Where a line's words hold digits (`acc1`, `ResNet50`, `lr0`), its shape is kept with them
    (`_named_shape`): those digits are part of the names, not values, and `acc1` may be known
    where `acc2` is not.
    """

    __slots__ = ("_named", "_shapes")

    def __init__(self) -> None:
        self._shapes: set[bytes] = set()
        self._named: set[bytes] = set()  # shapes whose lines' words hold digits

    def holds(self, line: str, shape: bytes) -> bool:
        """Whether a line of this shape (and these named digits) gave no metric before."""
        return shape in self._shapes or (
            shape in self._named and _named_shape(line, shape) in self._shapes
        )

    def add(self, line: str, shape: bytes) -> None:
        """Keep that this line's shape gave no metric, unless its values could change that.

        A counter's value can: `step=5` alone gives nothing, `step=-5` of the same shape is
        no count (a `ValueError`, an unparsed line); such lines are read in full each time.
        """
        if _COUNTER_VALUE.search(line) is not None:
            return
        if len(self._shapes) >= PLAN_CACHE_SIZE:
            self._shapes.clear()
            self._named.clear()
        if _WORD_DIGITS.search(line) is None:
            self._shapes.add(shape)
        else:
            self._named.add(shape)
            self._shapes.add(_named_shape(line, shape))


_GAVE_NOTHING = ShapesWithoutMetric()
"""Shapes of lines `parse_generic_line` read in full and found no metric in: a log repeats
its other lines' shapes (banners, chores, tables of words)."""


_KEYS = re.compile(r"[A-Za-z][\w./]*:")


def last_redraw(line: str) -> str:
    r"""The last of the records a line repeats, run together where a `\r` was lost.

    fastText prints `Progress:  24.7% ... avg.loss:  1.294877 ETA: Progress:  49.9% ...` on
    one line when its output goes to a file: the last record is the current one. A line is
    such a run when its first key comes back after a blank with the same keys before it.
    """
    colon = line.find(":")
    if not 0 < colon < 24:
        return line
    head = " " + line[: colon + 1]
    again = line.rfind(head)
    if again <= colon or " " in head[1:]:
        return line  # the common case: the first key does not come back
    last = line[again + 1 :]
    first_keys = _KEYS.findall(line[: line.find(head, colon)])
    return last if len(first_keys) > 1 and first_keys == _KEYS.findall(last) else line


def _may_be_record(line: str) -> bool:
    """Whether a line without `:` or `=` has a separator a record's fields may have."""
    return "|" in line or ";" in line or "\t" in line or ", " in line or " - " in line


def _keyvalue_metric(line: str, shape: bytes | None = None) -> LogMetric | None:
    """`parse_generic_line` of a normalised line with `:` or `=`, by plan or the long way."""
    # A log prints the same few shapes of line, numbers aside: the second time a shape gives
    # a metric, what the pair regex and the checks decided is kept as a plan, and lines of
    # that shape are read by it, at a third of the cost (`keyvalue_plans`). Lines that are not
    # ASCII too (a bar cut at the terminal's edge, `Epoch 2: 100%|█| ... val_a`): two lines
    # with the same UTF-8 shape hold the same other characters at the same places.
    if shape is None:
        shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    plan = _PLANS.plans.get(shape)
    if plan is not None:
        try:
            metric = plan.replay(line)
        except (ValueError, ArithmeticError):
            metric = None  # the long way below raises the parser's own error for the line
        if metric is not None:
            return metric
    metric = _parse_pairs(line)
    if metric is None:
        return _spaced_after_pairs(line)
    _PLANS.learn(shape, lambda: _make_plan(line, metric))
    return metric


_WORD_DIGITS = re.compile(r"[A-Za-z_][0-9]+")
_NOT_PLAIN = ShapesWithoutMetric()
"""Shapes of console lines that gave no metric (see `parse_plain_line`)."""
MAX_PLAIN_CHARS = 512
"""Longest line `parse_plain_line` reads: a longer one is a dump (a config, an environment)."""


def parse_plain_line(line: str) -> LogMetric | None:
    """`parse_generic_line` of a console format's line that the format does not claim.

    Only a `key: value` or `key=value` line that names a metric or counter the vocabulary
    knows (loss, accuracy, step, epoch, learning rate, mAP, IoU, perplexity) is read: such a
    log's other lines are banners, tables and declined progress bars, and reading each of
    them the long way would cost more than the format's own lines (see
    `parsers.registry.make_parser`). A line longer than `MAX_PLAIN_CHARS` is a dump
    (Ultralytics' 1,700-character `engine/trainer:` settings).
    """
    line = normalise_line(line)  # the last `\r` frame: the format has just normalised it
    if "{'" in line or '{"' in line:  # a printed mapping: no longer than a record needs
        mapped = _mapping_metric(line)
        if mapped is not None:
            return mapped
    if len(line) > MAX_PLAIN_CHARS:
        return None
    if ":" not in line and "=" not in line:
        # `val loss 5.25` among a format's own lines (llm.c beside nanoGPT-style steps)
        return parse_spaced_line(line) if "loss" in line else None
    if "<" in line and "|" in line and line[-1:] == "]":
        # a progress bar (`| 0/? [00:00<?, ?it/s]`) that the format read or declined (an
        # evaluation or chore bar, one with no rate yet): its business, not a plain line
        return None
    if ".py:" in line:
        # a logging prefix (`[INFO|trainer.py:2526] ... Total optimization steps = 170`):
        # the Trainer's banner, whose counts are no step and whose `file:line` no metric
        return None
    # A console log repeats its other lines' shapes (declined bars, table rows): a shape that
    # gave nothing gives nothing again. Where its words hold digits, they count as part of
    # the shape (`acc1` is known, `acc2` is not; `ResNet50`, `lr0`).
    low = line.lower()
    # spelled out: one `in` test after another runs in C, a generator over a tuple does not
    if not (
        "loss" in low
        or "acc" in low
        or "step" in low
        or "epoch" in low
        or "iter" in low
        or "lr" in low
        or "map" in low
        or "iou" in low
        or "ppl" in low
        or "perplexity" in low
        or "top1" in low
        or "top5" in low
        or "prec@" in low
        or "learning_rate" in low
        or "grad_norm" in low
        or "reward" in low
    ):
        return None
    shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    if _NOT_PLAIN.holds(line, shape):
        return None
    metric = _keyvalue_metric(line)  # the pairs alone: no record reading of a format's lines
    if metric is None:
        _NOT_PLAIN.add(line, shape)
    return metric


def _mapping_metric(line: str) -> LogMetric | None:
    """`parse_mapping_line`, dated by the ISO timestamp a logging prefix gives the line."""
    metric = parse_mapping_line(line)
    if metric is None or metric.taken_at is not None:
        return metric
    taken_at = _timestamp(line)
    if taken_at is None:
        return metric
    return LogMetric(metric.values, metric.step, metric.epoch, taken_at, metric.unparsed_values)


def _named_shape(line: str, shape: bytes) -> bytes:
    """A line's shape with the digits its words hold (`ResNet50`, `acc1`), which it zeroes."""
    return shape + b"\0" + ",".join(_WORD_DIGITS.findall(line)).encode()


def parse_without_plans(line: str) -> LogMetric | None:
    """`parse_generic_line` the long way, never with a plan: the reference plans must match."""
    line = normalise_line(line)
    if "{'" in line or '{"' in line:  # as `parse_generic_line`: mappings first
        mapped = _mapping_metric(line)
        if mapped is not None:
            return mapped
    line = last_redraw(line)
    shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    if ":" not in line and "=" not in line:
        metric = parse_spaced_line(line)
        if metric is None and not _may_be_record(line):
            return None
        return read_better(line, metric, shape)
    return read_better(line, _parse_pairs(line) or _spaced_after_pairs(line), shape)


def _spaced_after_pairs(line: str) -> LogMetric | None:
    """`parse_spaced_line` of a line with `:` or `=` whose pairs gave nothing.

    A line with `=` is a `key=value` line (or a bar's postfix): no `key value` reading.
    """
    return None if "=" in line else parse_spaced_line(line)


def _parse_pairs(line: str) -> LogMetric | None:
    """`parse_generic_line` of a normalised line with `:` or `=`, without plans."""
    body = blank_counters(_body(line))
    # a pair ends within a few characters of its separator: skip a long tail with none
    end = max(body.rfind("="), body.rfind(":")) + 64
    # `split` hands back [text, key, value, text, key, value, ..., rest] in one call, without
    # a match object per pair: a third of the cost of `finditer` on a short line.
    parts = _PAIR.split(body) if end >= len(body) else _split_window(body, end)
    if len(parts) == 1 or _not_metrics(body[:end]):
        return None
    infos = _infos(line, compound_keys(parts[0::3], parts[1::3]))
    pairs = len(infos) - sum(map(_IS_CONFIG, infos))
    if any(map(_IS_KNOWN, infos)):
        allowed = MAX_PROSE_WORDS
    else:
        allowed = 1 if pairs > 1 else 0  # `INFO foo=1 bar=2`, not `Total FLOPs: 0`
    if not pairs or _too_wordy(parts[0::3], allowed):
        return None
    taken_at = _timestamp(line)
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    for (config, _, counter, name), text in zip(infos, parts[2::3], strict=True):
        if config:
            continue
        if counter is None:
            if ":" not in text:  # `12:30` is a time of day or a duration, not a value
                try:
                    number = float(text)  # what `parse_number` tries first, without a call
                except ValueError:
                    number = read_number(text)
                values.append((name, number))
        elif ":" in text:
            if counter == "eta":
                values.append(("eta_s", parse_duration(text)))
        elif counter == "step":
            step = to_step(read_count(text))
        elif counter == "epoch":
            epoch = to_epoch(read_count(text))
        else:
            values.append((name, read_number(text)))
    if not values:
        return None
    if (step is None or epoch is None) and ("poch" in line or "[" in line):
        in_words = counters_in_words(line)
        step = in_words[0] if step is None else step
        epoch = in_words[1] if epoch is None else epoch
    return LogMetric(tuple(values), step, epoch, taken_at)


_VAL_SCORES = frozenset({"val/miou", "val/map", "val/map_50", "val/pixel_acc"})


def _infos(line: str, keys: list[str]) -> list[_KeyInfo]:
    """What each key of a line is, with the split its bare keys (`loss`, `acc`) belong to.

    An evaluation line opens with `Test`, `Val` or `Eval`; a line of no step or epoch that
    reports a segmentation or detection score (`Loss: 0.25, MeanIU: 0.43`, HRNet's
    validation line) is one too.
    """
    infos = list(map(_KEY_INFO.__getitem__, keys))  # a loop in C for keys seen before
    if _opens_evaluation(line) or (
        not _VAL_SCORES.isdisjoint(map(_NAME, infos))  # loops in C
        and not any(map(_COUNTER, infos))
        and "poch" not in line
        and "[" not in line
    ):
        return list(map(_VAL_KEY_INFO.__getitem__, keys))
    return infos


_LOGGER_PREFIX = re.compile(r"\s*\[[^\]]{0,40}\]\s*(?:[\w.]+\s+)?(?:INFO|DEBUG):?\s+")
"""`[2022/04/04 17:51:49] root INFO: `: a logger's stamp, name and level before the line."""


def _opens_evaluation(line: str) -> bool:
    """`opens_evaluation` of a line, or of what follows its logger's prefix.

    `[2022/04/04 17:51:49] root INFO: [Eval][Epoch 5][Avg]CELoss: 3.06` is an evaluation line.
    """
    if opens_evaluation(line):
        return True
    if "INFO" not in line[:80] and "DEBUG" not in line[:80]:
        return False
    prefix = _LOGGER_PREFIX.match(line)
    return prefix is not None and opens_evaluation(line[prefix.end() :])


def _body(line: str) -> str:
    """The line without rule characters (`=`, `-`, `*`, `#`, `~`, blanks) at its ends."""
    # `===== epoch 3 =====` rules are decoration; a line of them alone costs a regex pass
    # over every `=` otherwise. `str.strip` takes 50 us on a 10,000-character rule: a
    # regex finds where a leading rule ends faster.
    if line[:1] in _RULE_STARTS:
        start = _LEADING_RULE.match(line).end()  # type: ignore[union-attr]
        return line[start:].rstrip(_RULE_CHARS) if start < len(line) else ""
    return line.strip(_RULE_CHARS)


def _window_matches(body: str, end: int) -> list[re.Match[str]]:
    """The pairs that start before `end`."""
    matches = list(_PAIR.finditer(body, 0, end))
    if matches and matches[-1].end() == end:
        # a value running past the window (`lr=1000...0`) would be read cut short
        whole = _PAIR.match(body, matches[-1].start())
        matches[-1:] = [whole] if whole is not None else []
    return matches


def _split_window(body: str, end: int) -> list[str]:
    """`_PAIR.split(body)` for the pairs that start before `end`, the rest left as text."""
    matches = _window_matches(body, end)
    parts: list[str] = []
    start = 0
    for match in matches:
        parts += (body[start : match.start()], match[1], match[2])
        start = match.end()
    parts.append(body[start:])
    return parts


def _not_metrics(head: str) -> bool:
    # substrings first: the regex alone costs more than parsing the rest of the line
    if not (
        "`" in head
        or ".py:" in head
        or "Warn" in head
        or "WARN" in head
        or "warn" in head
        or "Tip:" in head
        or "(" in head
    ):
        return False
    return _NOT_METRICS.search(head) is not None


_KeyInfo = tuple[bool, bool, "str | None", str]
"""(a config key such as `LOCAL_RANK`, a known metric or counter, the counter it is (`step`,
`epoch`, `eta`) or None, the normalised metric name)."""
_IS_CONFIG = operator.itemgetter(0)
_IS_KNOWN = operator.itemgetter(1)
_COUNTER = operator.itemgetter(2)
_NAME = operator.itemgetter(3)
_KEY_INFO_SIZE = 4096


class _KeyInfos(dict[str, _KeyInfo]):
    """What each key is, worked out once per distinct key (a log repeats a handful of them).

    A dict, so a key seen before costs one lookup in C (`infos[key]`), no call.
    """

    def __init__(self, split: str) -> None:
        super().__init__()
        self.split = split
        """The split bare keys belong to."""

    def __missing__(self, key: str) -> _KeyInfo:
        counter = _COUNTERS.get(key.lower())
        name = metric_name(key, self.split)
        known = counter is not None or name in STANDARD_NAMES
        config = (
            key[:1].isupper()
            and _CONFIG_KEY.fullmatch(key) is not None
            and not known
            or key == "v_num"
        )  # Lightning's logger version, in a bar's postfix
        if len(self) >= _KEY_INFO_SIZE:  # keys come from logs: keep the cache bounded
            self.clear()
        info = self[key] = (config, known, counter, name)
        return info


_KEY_INFO = _KeyInfos("train")
_VAL_KEY_INFO = _KeyInfos("val")
_SPLIT_KEY_INFO = {"train": _KEY_INFO, "val": _VAL_KEY_INFO}
"""By split (the code's few, never a log's words)."""
_PLANS = LinePlans()


def _too_wordy(pieces: list[str], allowed: int) -> bool:
    """Whether the text outside the pairs holds more than `allowed` words.

    The last piece counts by its first 256 characters (a long tail).
    """
    pieces[-1] = pieces[-1][:256]
    text = " ".join(pieces)
    # Every word is a whitespace-separated token: few tokens settle it without the regex
    # (`2026-11-26 06:07:46,953 INFO step=...` has three).
    if len(text.split()) <= allowed:
        return False
    return len(_WORD.findall(text)) > allowed


def pairs_to_metric(
    pairs: list[tuple[str, str]], split: str = "train", taken_at: float | None = None
) -> LogMetric | None:
    """Build a metric from (key, text) pairs, lifting step/epoch/ETA counters out of the values.

    Raises:
        ValueError: a value that is not a number, or a step or epoch that is no count.
    """
    infos = _SPLIT_KEY_INFO.get(split)
    if infos is None:  # not `or`: an empty cache is falsy, and would be built again each call
        infos = _SPLIT_KEY_INFO.setdefault(split, _KeyInfos(split))
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    for key, text in pairs:
        _, _, counter, name = infos[key]  # one lookup for a key seen before
        if counter is None:
            if ":" not in text:  # `12:30` is a time of day or a duration, not a value
                try:
                    number = float(text)  # what `parse_number` tries first, without a call
                except ValueError:
                    number = parse_number(text)
                values.append((name, number))
        elif ":" in text:
            if counter == "eta":
                values.append(("eta_s", parse_duration(text)))
        elif counter == "step":
            step = to_step(parse_number(text))
        elif counter == "epoch":
            epoch = to_epoch(parse_number(text))
        else:
            values.append((name, parse_number(text)))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _make_plan(line: str, metric: LogMetric) -> LinePlan | None:
    """A plan for the lines of `line`'s shape, from the pairs `_parse_pairs` found in it."""
    body = blank_counters(_body(line))
    at = len(line) - len(line.lstrip(_RULE_CHARS))  # where `body` starts in `line`
    end = max(body.rfind("="), body.rfind(":")) + 64
    matches = list(_PAIR.finditer(body)) if end >= len(body) else _window_matches(body, end)
    pairs = [
        (
            match[1],
            slice(at + match.start(1), at + match.end(1)),
            match[2],
            slice(at + match.start(2), at + match.end(2)),
        )
        for match in matches
    ]
    texts = [
        body[end : match.start()]
        for end, match in zip([0, *(match.end() for match in matches)], matches, strict=False)
    ]
    keys = compound_keys(texts, [match[1] for match in matches])
    pairs = [(key, *pair[1:]) for key, pair in zip(keys, pairs, strict=True)]
    stamp = _ISO_TS.match(line) if line[:1] in _STAMP_STARTS else None
    return make_plan(
        line,
        metric,
        pairs,
        dict(zip(keys, _infos(line, keys), strict=True)),
        None
        if stamp is None
        else (
            slice(stamp.start(1), stamp.end(2)),
            None if stamp[3] is None else slice(*stamp.span(3)),
        ),
        counters_in_words if "poch" in line or "[" in line else None,
    )


def _timestamp(line: str) -> float | None:
    if line[:1] not in _STAMP_STARTS:  # most lines start with no date: skip the regex
        return None
    match = _ISO_TS.match(line)
    if match is None:
        return None
    date, clock, fraction = match.groups()
    seconds = local_timestamp(date, clock)
    if seconds is None:
        return None
    return seconds + float("0." + fraction) if fraction else seconds

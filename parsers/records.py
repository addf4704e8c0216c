"""A record reader by structure: fields split by separators, step anchors, units and short names.

For logs of frameworks no parser knows: `Ep. 62 : Up. 20000 : Cost 0.0638 * 898,943 : Time
111.22s : 8082.72 words/s`, `Step 100/ 1000; acc: 4.10; ppl: 24633.68; xent: 10.11`, `Epoch
1, Step: 1160, Batch Loss: 3.41, Tokens per Sec: 834, Lr: 0.000156`, `[0]  train-mlogloss:1.5
test-mlogloss:1.6`, ` iteration 60/ 1000 | consumed samples: 240 | elapsed time per iteration
(ms): 1378.0 | lm loss: 8.39E+00 |`, `[Eval][Epoch 5][Avg]CELoss: 3.06, top1: 0.58`. A line is
cut into fields at ` : `, ` | `, `;`, `, ` and tabs; a field is a name and a number (`name:
2.31`, `name 2.31`, `name=2.31`) or a number and its unit (`812.5 words/s`: the unit names the
metric). The vocabulary (`parsers.vocabulary_short`) says what a name means; a record counts
when it holds a known metric, and at most a few fields it cannot read. Bracketed anchors before
the first field (`[Train]`, `[Epoch 1/20]`, `[Iter: 0/8]`) give its split and counters.
"""

from __future__ import annotations

import re

from parsers.keyvalue_plans import DIGITS_AS_ZERO, PLAN_CACHE_SIZE
from parsers.model import LogMetric
from parsers.record_fields import (
    NUMBER,
    FieldRead,
    placeholder,
    prose_after,
    read_field,
    settled,
)
from parsers.text import STANDARD_NAMES, parse_duration
from parsers.values import to_epoch, to_step
from parsers.vocabulary_short import COUNTERS, METRIC_WORDS, SCALED_NAMES

# a logging prefix: `[2022-12-14 14:41:34]`, `[2024-01-09 16:24:33,925 INFO]`,
# `2022-02-26 16:56:01,610 - INFO - joeynmt.training -`, Python's documented
# `%(asctime)s - %(name)s - %(levelname)s - ` (`... - speechbrain.utils.train_logger - INFO -`),
# `[name] `, `TRAIN 2021-09-14T...:`,
# `[2022/04/04 17:51:12] root INFO: [Train][Epoch 1/20][Iter: 0/8]` (a logger and its level,
# then bracketed anchors run into the first field)
_PREFIX = re.compile(
    r"^(?:\s*\[(?!\d+\])[^\]]{0,60}\])*\s*"
    r"(?:\d{4}-\d\d-\d\d[ T][\d:.,]+\s*(?:-\s*[\w.]+\s*-\s*[\w.]+\s*-\s*)?)?"
    r"(?:(?:[\w.]+\s+)?(?:INFO|DEBUG):?\s+)?(?:\[(?!\d+\])[^\]]{0,60}\]\s*)*"
)
_ANCHOR = re.compile(r"\[\s*([^\]]*?)\s*\]")
_SEPARATORS = re.compile(
    r"\s+[:|]\s+|\s*;\s*|,\s+|\t+|\s+-\s+|\s*\|\s*|\s+\((?![a-z]{1,3}\)\s*[:=])|(?<=\d):\s+"
    r"|\s+(?=[A-Za-z][\w./-]*[:=]\S)|(?<=\d)\s+(?=[A-Za-z][\w@.-]*\s+[-+]?\.?\d)"
)
"""Where fields part: ` : `, ` | `, `;`, `, `, tabs, ` - `, ` (` (not a unit's: `time (ms):
1378.0`), a `:` after a number, blanks before a `name:value` token (`s:400 trl:2.31`) and
blanks between a number and the next `name number` (`Acc@1 62.500 Acc@5 100.000`)."""
_BARE_NUMBER = re.compile(NUMBER)
_BARE_NAME = re.compile(r"[A-Za-z][\w.-]*")
_TRAILING_PAIR = re.compile(rf"[A-Za-z][\w.]*\s+(?:{NUMBER})$")
_TRAILING_TO = re.compile(rf"[A-Za-z][\w.]*(?:\s+[A-Za-z][\w.]*)?\s+to\s+(?:{NUMBER})(?=\.?$)")
"""A sentence that sets one value: `LearningRateScheduler setting learning rate to 0.003.`"""
_LEADING_COUNT = re.compile(r"^\[?(\d+)(?:\]|:(?=\s))\s*")
"""The round a record opens with: `[120]` (LightGBM, XGBoost), `120:` then a blank (CatBoost)."""
_VALIDATION = re.compile(
    r"^(?:\[valid\]|valid(?:ation)?\b|dev\b|eval(?:uation)?\b|Valid(?:ation)?\b|Dev\b"
    r"|Eval(?:uation)?\b|VALID|EVAL)"
)
_SPLIT_HEAD = re.compile(r"(?:Test|Eval|Evaluation|Valid|Validation|Val|Train)\s*:\s+(?=[A-Za-z])")
"""`Test:  Acc@1 62.500 Acc@5 100.000`: a split, then the fields (torchvision's summary)."""
_TAG = re.compile(r"(?i:train|training|valid|validation|val|eval|evaluation|test|dev)\b[^\d]{0,40}")
"""A field of no number that names the record's split: `valid on 'valid' subset`, `[Eval]`."""
MAX_UNREAD = 3
"""Fields a record may hold besides those it reads (prose, file names, `new best`)."""
MAX_PROSE_WORDS = 4
"""Words a record may hold outside what it reads: more is a sentence (`Saving the model with
val_loss=0.123 to /ckpt after epoch 3 because it improved`)."""
_WORD = re.compile(r"[A-Za-z]{2,}")


def parse_record_line(line: str, shape: bytes | None = None) -> LogMetric | None:
    """The metric of a separator-delimited record line; None when it is no such record.

    A log repeats the shapes of its lines (the same text, other digits, at the same places):
    what the reader decided for a shape is kept as a recipe (which number is what), and the
    lines of that shape are read by it; a shape that gave no record gives none again
    (bounded, like the key-value reader's plans).

    Args:
        line: a normalised line.
        shape: the line's UTF-8 bytes with its digits as `0` (`DIGITS_AS_ZERO`), when the
            caller has made it already.
    """
    if shape is None:
        shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    if shape in RECORD_RECIPES:
        items = RECORD_RECIPES[shape]
        return None if items is None else _cook(line, items)
    recipe = _read_record(line)
    if len(RECORD_RECIPES) >= PLAN_CACHE_SIZE:
        RECORD_RECIPES.clear()
    if recipe is None:
        RECORD_RECIPES[shape] = None
        return None
    items, private = recipe
    if not private:  # a name with a digit (`acc1`, `acc5`: one shape) is not kept
        RECORD_RECIPES[shape] = items
    return _cook(line, items)


Item = tuple[str, str, int, int, int, int, float]
"""(`step`, `epoch`, `value`, `rate` or `duration` (see `record_fields.FieldRead`), the metric
name, where the number is, where its total is or (0, 0), the scale to milliseconds or 1)."""
RECORD_RECIPES: dict[bytes, list[Item] | None] = {}
"""By line shape: its recipe, or None for a shape that gave no record."""


def _cook(line: str, items: list[Item]) -> LogMetric | None:
    """The metric of a line by its shape's recipe; None when only placeholders are left."""
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    known = False
    for kind, name, start, end, total_start, total_end, scale in items:
        if kind == "duration":  # `eta: 0:08:23`
            values.append((name, parse_duration(line[start:end])))
            continue
        number = float(line[start:end].replace(",", ""))
        if kind == "step":
            step = to_step(number)
        elif kind == "epoch":
            epoch = to_epoch(number)
        else:
            if kind == "rate":  # `time per iteration (ms): 1378.0`: iterations a second
                number = scale / number if number > 0 else 0.0
            else:
                if total_end:  # `acc: 9820/10000`: a count of a total is a share
                    total = float(line[total_start:total_end])
                    number = number / total if total else number
                number *= scale
            if placeholder(name, number):
                continue
            values.append((name, number))
            known = (
                known
                or name in STANDARD_NAMES
                or any(w in name for w in METRIC_WORDS)
                or name[:5] == "best/"
            )
    return LogMetric(tuple(values), step, epoch) if known else None


def _read_record(line: str) -> tuple[list[Item], bool] | None:
    """The recipe of a line, and whether it must not be kept for its shape; None: no record."""
    if not any(map(str.isdigit, line)) or _is_bar(line) or _NOT_METRICS.search(line):
        return None  # no number, a progress bar, a warning
    match = _PREFIX.match(line)
    at = match.end() if match else 0
    body = line[at:]
    split = "val" if _VALIDATION.match(body) or "[valid]" in line[:40] else "train"
    best = body[:5].lower() == "best "  # `Best validation result ... at step 5000: 21.3 bleu`
    if best and "valid" in body[:20].lower():
        split = "val"
    items: list[Item] = []
    if "[" in line[:at]:
        split = _anchors(line, at, split, items)
    head = _SPLIT_HEAD.match(body) if body[:1] in "TEV" else None
    if head is not None:
        split = "train" if body[:2] == "Tr" else "val"
        at += head.end()
        body = body[head.end() :]
    lead = _LEADING_COUNT.match(body)
    if lead is not None:  # `[120]  valid_0's auc: 0.81`, `120:\tlearn: 0.25`: the round
        items.append(("step", "step", at + lead.start(1), at + lead.end(1), 0, 0, 1.0))
        at += lead.end()
        body = body[lead.end() :]
    read = _read_fields(body, at, split, best, items)
    if read is None:
        return None
    unread, prose, private = read
    values = [item for item in items if item[0] not in COUNTERS.values()]
    if unread > MAX_UNREAD + len(values) or prose > MAX_PROSE_WORDS:
        return None
    if _cook(line, items) is None:  # nothing known, or placeholders only
        return None
    return items, private


def _anchors(line: str, end: int, split: str, items: list[Item]) -> str:
    """Read the bracketed anchors of a record's prefix into `items`; the split they name.

    `[Train]`/`[Eval]` name the split, `[Epoch 1/20]` and `[Iter: 0/8]` the counters,
    `[best metric: 0.586]` a value; others (`[Avg]`, `[Rank 0]`, a date) say nothing.
    """
    for anchor in _ANCHOR.finditer(line, 0, end):
        text = anchor[1]
        if _TAG.fullmatch(text) is not None:
            split = "train" if text[:2].lower() == "tr" else "val"
            continue
        read = read_field(text, split)
        if read is None:
            continue
        name, how, start, stop, _, _, scale = read
        kind = COUNTERS.get(name) or how
        if kind in ("step", "epoch") and any(item[0] == kind for item in items):
            continue
        at = anchor.start(1)
        items.append((kind, name, at + start, at + stop, 0, 0, scale))
    return split


def _read_fields(
    body: str, at: int, split: str, best: bool, items: list[Item]
) -> tuple[int, int, bool] | None:
    """Read the fields of a record's body into `items`.

    Returns:
        (fields unread, words of prose, whether a name holds a digit).
    """
    unread = prose = 0
    private = False  # a name with a digit (`acc1`): the recipe holds for this line only
    pending = ""  # `cross-entropy : 0.2433`: a name alone, its number in the next field
    for start, field in _fields(body):
        start += at
        merged = bool(pending) and _BARE_NUMBER.fullmatch(field) is not None
        if merged:
            unread -= 1
            prose -= len(_WORD.findall(pending))
            read = read_field(f"{pending} {field}", split)
            if read is not None:  # the number is this whole field
                read = (*read[:2], len(pending) + 1, len(pending) + 1 + len(field), 0, 0, read[6])
                start -= len(pending) + 1
        else:
            read = read_field(field, split)
        pending = field if _BARE_NAME.fullmatch(field) else ""
        if read is None:
            read, start = _read_tail(field, start, split)
        if read is None:
            if _TAG.fullmatch(field) is not None:  # `valid on 'valid' subset`: the split
                split = "train" if field[:2].lower() == "tr" else "val"
            elif not settled(field):  # a count or setting (`global batch size: 4`) is no prose
                unread += 1
                prose += len(_WORD.findall(field))
            continue
        prose += prose_after(field)
        private = private or any(map(str.isdigit, read[0]))
        name, how, number_start, number_end, total_start, total_end, scale = read
        if best and "/" in name and not name.startswith("best/"):
            name = "best/" + name.split("/", 1)[1]
        counter = COUNTERS.get(name)
        if counter is not None and any(kind == counter for kind, *_ in items):
            continue  # the first step or epoch a record names is its own
        items.append(
            (
                counter or how,
                name,
                start + number_start,
                start + number_end,
                start + total_start if total_end else 0,
                start + total_end if total_end else 0,
                scale,
            )
        )
    return unread, prose, private


def _read_tail(field: str, start: int, split: str) -> tuple[FieldRead | None, int]:
    """The pair that ends a field of prose, and where the field's reading starts.

    `... at epoch 1`, `LearningRateScheduler setting learning rate to 0.003.`
    """
    for pattern in (_TRAILING_PAIR, _TRAILING_TO):
        tail = pattern.search(field)
        if tail is not None:
            read = read_field(tail[0], split)
            if read is not None:
                return read, start + tail.start()
    return None, start


def _fields(body: str) -> list[tuple[int, str]]:
    """(where it starts, the field) for each field of a record, stripped of ` ()`."""
    fields = []
    position = 0
    for separator in [*_SEPARATORS.finditer(body), None]:
        end = len(body) if separator is None else separator.start()
        raw = body[position:end]
        field = raw.strip(" ()")
        if field:
            fields.append((position + len(raw) - len(raw.lstrip(" ()")), field))
        if separator is not None:
            position = separator.end()
    return fields


_RENAMES = {
    "xent": "train/loss",
    "avg.loss": "train/loss",
    "cost": "train/loss",
    "trl": "train/loss",
    "tel": "val/loss",
    "gnorm": "grad_norm",
    "norm": "grad_norm",
    "l.r.": "lr",
    "tps": "throughput/tokens_s",
    "sps": "throughput/samples_s",
    "ips": "throughput/samples_s",
    "wps": "throughput/tokens_s",
    **{name: scaled[0] for name, scaled in SCALED_NAMES.items()},
}
"""Short names the key-value reader keeps as printed, and what they mean."""


def renamed(metric: LogMetric) -> LogMetric:
    """`metric` with the short names of `_RENAMES` given their meaning; `s` is the step."""
    if not any(name in _RENAMES or name == "s" for name, _ in metric.values):
        return metric
    step = metric.step
    values: list[tuple[str, float]] = []
    for name, value in metric.values:
        if name == "s" and step is None and value == int(value) and value >= 0:
            step = to_step(value)  # `s:400`: the step, as a short counter
        elif name in SCALED_NAMES:  # `mtps:1.2`: million tokens a second
            values.append((SCALED_NAMES[name][0], value * SCALED_NAMES[name][1]))
        elif name != "s":
            values.append((_RENAMES.get(name, name), value))
    if not values:
        return metric
    return LogMetric(tuple(values), step, metric.epoch, metric.taken_at, metric.unparsed_values)


def read_better(line: str, metric: LogMetric | None, shape: bytes) -> LogMetric | None:
    """What the generic reader makes of a normalised line, given what its pairs gave.

    Nothing from the pairs: the line may be a record (`parse_record_line`). Something: its
    short names get their meaning (`renamed`), and the record reading wins where it reads
    more, such as a step the pairs do not name (`Step 100/ 1000; acc: 4.10; ...`), names the
    pairs cut short (`Batch Loss: 1.92, Tokens per Sec: 3100`) or a time with its unit
    (`step_avg:42.13ms`). Which of these a line gets depends on its shape alone (its names
    and counters), so it is decided once per shape.

    Args:
        line: a normalised line.
        metric: what the key-value reader gave for it.
        shape: the line's shape, as `parse_record_line` takes it.
    """
    if metric is None:
        return parse_record_line(line, shape) if len(line) <= _MAX_RECORD_CHARS else None
    action = RECORD_ACTIONS.get(shape)
    if action is None:
        action = _action(line, metric, shape)
        if len(RECORD_ACTIONS) >= PLAN_CACHE_SIZE:
            RECORD_ACTIONS.clear()
        RECORD_ACTIONS[shape] = action
    if action == AS_READ:
        return metric
    if action == _RECORD:
        return parse_record_line(line, shape) or renamed(metric)
    return renamed(metric)


AS_READ, _RENAMED, _RECORD = range(3)
RECORD_ACTIONS: dict[bytes, int] = {}
"""By line shape: the pairs' reading as it is, with short names renamed, or the record's."""


def _action(line: str, metric: LogMetric, shape: bytes) -> int:
    """Which reading a line of this shape gets (see `read_better`)."""
    named = renamed(metric)
    if _may_read_better(named, line):
        record = parse_record_line(line, shape)
        if record is not None and _reading(record) > _reading(named):
            return _RECORD
    return AS_READ if named is metric else _RENAMED


_RECORD_HINT = re.compile(r" [:|] |;|\t|, ")
_UNIT_HINT = re.compile(r"\dm?s\b|\d%|\dms/")
_NUMBERS = re.compile(r"(?<![\w.])\d[\d.,]*")
_MAX_RECORD_CHARS = 512
_NOT_METRICS = re.compile(r"`|\.py:\d+: |Warning\b|\bWARN(?:ING)?\b|\bwarning\b|\bTip:")
"""Lines that are never metrics (as the key-value reader has them): code in backticks, Python
warnings, warning levels and tips."""


def _is_bar(line: str) -> bool:
    """A progress bar: the progress formats' to read."""
    return "%|" in line or "it/s" in line or "s/it" in line


def _may_read_better(metric: LogMetric, line: str) -> bool:
    """Whether the record reader may read more of a line than its pairs gave.

    So it may where the line names a counter the pairs did not read, a number carries a unit,
    or a name is unknown.
    """
    if _is_bar(line) or len(line) > _MAX_RECORD_CHARS:
        return False
    if metric.step is None and metric.epoch is None and _has_counter_word(line):
        return True
    if _UNIT_HINT.search(line) is not None:  # `step_avg:42.13ms`, `dt 512.3ms`, `mfu 41.2%`
        return True
    if not all(name in STANDARD_NAMES for name, _ in metric.values):
        return True  # `train-mlogloss:0.81`, `Batch Loss: 1.92`: the vocabulary may know them
    # `step 5 | loss 2.0 | norm 1.2 | sps 120.5`: fields the pairs left unread
    counters = (metric.step is not None) + (metric.epoch is not None)
    return (" | " in line or ";" in line) and len(_NUMBERS.findall(line)) > len(
        metric.values
    ) + counters


def _reading(metric: LogMetric) -> int:
    """How much a reading of a line says: its counters, known metrics and step time."""
    known = sum(name in STANDARD_NAMES or name == "step_time_ms" for name, _ in metric.values)
    return known + (metric.step is not None) + (metric.epoch is not None)


def _has_counter_word(line: str) -> bool:
    """Whether a line names a step or epoch in words a record reads (`Step`, `Up.`, `Ep.`)."""
    low = line.lower()
    return "step" in low or "ep." in low or "up." in low or "iter" in low or "epoch" in low

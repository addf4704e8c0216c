"""A record reader by structure: fields split by separators, step anchors, units and short names.

For logs of frameworks no parser knows: `Ep. 62 : Up. 20000 : Cost 0.0638 * 898,943 : Time
111.22s : 8082.72 words/s`, `Step 100/ 1000; acc: 4.10; ppl: 24633.68; xent: 10.11`, `Epoch
1, Step: 1160, Batch Loss: 3.41, Tokens per Sec: 834, Lr: 0.000156`, `[0]  train-mlogloss:1.5
test-mlogloss:1.6`. A line is cut into fields at ` : `, ` | `, `;`, `, ` and tabs; a field is a
name and a number (`name: 2.31`, `name 2.31`, `name=2.31`) or a number and its unit (`812.5
words/s`: the unit names the metric). The vocabulary (`parsers.vocabulary_short`) says what a
name means; a record counts when it holds a known metric, and at most a few fields it cannot
read.
"""

from __future__ import annotations

import re

from parsers.keyvalue_plans import DIGITS_AS_ZERO, PLAN_CACHE_SIZE
from parsers.model import LogMetric
from parsers.text import STANDARD_NAMES, metric_name
from parsers.values import to_epoch, to_step
from parsers.vocabulary_short import (
    COUNTERS,
    METRIC_WORDS,
    SHORT_NAMES,
    SPLIT_FREE,
    UNIT_NAMES,
    split_and_base,
)

# a logging prefix: `[2022-12-14 14:41:34]`, `[2024-01-09 16:24:33,925 INFO]`,
# `2022-02-26 16:56:01,610 - INFO - joeynmt.training -`, `[name] `, `TRAIN 2021-09-14T...:`
_PREFIX = re.compile(
    r"^(?:\s*\[(?!\d+\])[^\]]{0,60}\])*\s*"
    r"(?:\d{4}-\d\d-\d\d[ T][\d:.,]+\s*(?:-\s*\w+\s*-\s*[\w.]+\s*-\s*)?)?")
_SEPARATORS = re.compile(
    r"\s+[:|]\s+|\s*;\s*|,\s+|\t+|\s+-\s+|\s*\|\s*|\s+\(|(?<=\d):\s+"
    r"|\s+(?=[A-Za-z][\w./]*[:=]\S)")
"""Where fields part: ` : `, ` | `, `;`, `, `, tabs, ` - `, ` (`, a `:` after a number, and
blanks before a `name:value` token (`s:400 trl:2.31`)."""
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# name, optional `:` or `=`, number, optional `/total`, optional unit
_NAMED = re.compile(
    rf"^(?P<name>[A-Za-z][\w.@/()-]*(?: [A-Za-z][\w.()-]*){{0,3}}?)\s*[:=]?\s*"
    rf"(?:tensor\()?(?P<num>{_NUMBER})\)?(?:\s*/\s*(?P<total>\d+))?"
    r"(?P<unit>%|[a-z]+(?:/[a-z]+)?)?(?P<rest>\s.*)?$")
# number then unit: `8082.72 words/s`, `12000/11000 tok/s` (the last count is the target's)
_UNITED = re.compile(
    rf"^(?:(?:{_NUMBER})/)?(?P<num>{_NUMBER})\s*"
    r"(?P<unit>[A-Za-z]+(?:/[A-Za-z]+)+|[A-Za-z]+ per [A-Za-z]+)$")
_BARE_NUMBER = re.compile(_NUMBER)
_BARE_NAME = re.compile(r"[A-Za-z][\w.-]*")
_TRAILING_PAIR = re.compile(rf"[A-Za-z][\w.]*\s+(?:{_NUMBER})$")
_LEADING_COUNT = re.compile(r"^\[(\d+)\]\s*")
_VALIDATION = re.compile(
    r"^(?:\[valid\]|valid(?:ation)?\b|dev\b|eval(?:uation)?\b|Valid(?:ation)?\b|Dev\b"
    r"|Eval(?:uation)?\b|VALID|EVAL)")
MAX_UNREAD = 3
"""Fields a record may hold besides those it reads (prose, file names, `new best`)."""
MAX_PROSE_WORDS = 4
"""Words a record may hold outside what it reads: more is a sentence (`Saving the model with
val_loss=0.123 to /ckpt after epoch 3 because it improved`)."""
_WORD = re.compile(r"[A-Za-z]{2,}")


def parse_record_line(line: str) -> LogMetric | None:
    """The metric of a separator-delimited record line; None when it is no such record.

    A log repeats the shapes of its lines (the same text, other digits): a shape that gave no
    record gives none again, and is not read a second time (bounded, like the key-value
    reader's plans).
    """
    shape = line.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO)
    if shape in _NOT_RECORDS:
        return None
    metric = _read_record(line)
    if metric is None:
        if len(_NOT_RECORDS) >= PLAN_CACHE_SIZE:
            _NOT_RECORDS.clear()
        _NOT_RECORDS.add(shape)
    return metric


_NOT_RECORDS: set[bytes] = set()
"""Shapes of lines that gave no record."""


def _read_record(line: str) -> LogMetric | None:
    """`parse_record_line` without the cache."""
    match = _PREFIX.match(line)
    body = line[match.end():] if match else line
    split = "val" if _VALIDATION.match(body) or "[valid]" in line[:40] else "train"
    best = body[:5].lower() == "best "  # `Best validation result ... at step 5000: 21.3 bleu`
    if best and "valid" in body[:20].lower():
        split = "val"
    step: int | None = None
    epoch: float | None = None
    lead = _LEADING_COUNT.match(body)
    if lead is not None:  # `[120]  valid_0's auc: 0.81`: the round, as LightGBM and XGBoost print
        step = to_step(int(lead[1]))
        body = body[lead.end():]
    values: list[tuple[str, float]] = []
    unread = 0
    known = 0
    prose = 0
    pending = ""  # `cross-entropy : 0.2433`: a name alone, its number in the next field
    for field in _SEPARATORS.split(body):
        field = field.strip(" ()")
        if not field:
            continue
        if pending and _BARE_NUMBER.fullmatch(field):
            field, unread = f"{pending} {field}", unread - 1
            prose -= len(_WORD.findall(pending))
        pending = field if _BARE_NAME.fullmatch(field) else ""
        read = _read_field(field, split)
        if read is None:
            tail = _TRAILING_PAIR.search(field)  # `... at epoch 1`: the pair at the end
            read = None if tail is None else _read_field(tail[0], split)
        if read is None:
            unread += 1
            prose += len(_WORD.findall(field))
            continue
        prose += _prose_after(field)
        name, number = read
        if best and "/" in name and not name.startswith("best/"):
            name = "best/" + name.split("/", 1)[1]
        counter = COUNTERS.get(name)
        if counter == "step":
            step = to_step(number) if step is None else step
        elif counter == "epoch":
            epoch = to_epoch(number) if epoch is None else epoch
        elif counter is None:
            if _placeholder(name, number):
                continue
            values.append((name, number))
            known += name in STANDARD_NAMES or any(word in name for word in METRIC_WORDS)
    if not known or unread > MAX_UNREAD + len(values) or prose > MAX_PROSE_WORDS:
        return None
    return LogMetric(tuple(values), step, epoch)


def _prose_after(field: str) -> int:
    """Words after the number of a field read by name (`... after 35,885,885`: one)."""
    if " " not in field:
        return 0
    named = _NAMED.match(field)
    rest = None if named is None else named["rest"]
    return 0 if not rest else len(_WORD.findall(rest))


def _placeholder(name: str, number: float) -> bool:
    """Whether a value is printed before there is one to print.

    `mfu -100.00%` (nanoGPT's, before its first estimate), `step_avg:nanms`, `iter_dt
    0.00ms` (no step timed yet).
    """
    if name == "mfu" or name.endswith("_ms") or name.startswith("throughput/"):
        return not number > 0  # NaN too
    return False


def _read_field(field: str, split: str) -> tuple[str, float] | None:
    """(metric name or counter, number) of one field, or None for a field it cannot read.

    A field may run on after its number (Marian's `Cost 0.0638 * 898,943 after 35,885,885`);
    `_prose_after` counts the words there.
    """
    field = field.replace("'s ", " ").replace("'", "")  # `valid_0's auc`, `'val_loss' reached`
    united = _UNITED.match(field)
    if united is not None:
        unit = united["unit"].lower()
        name = UNIT_NAMES.get(unit)
        return None if name is None else (name, float(united["num"].replace(",", "")))
    then_name = _NUMBER_THEN_NAME.match(field)  # `21.3 bleu`
    if then_name is not None:
        name = _metric(then_name["name"].lower(), split)
        return None if name is None else (name, float(then_name["num"]))
    named = _NAMED.match(field)
    if named is None:
        return None
    raw, text, unit = named["name"], named["num"], (named["unit"] or "").lower()
    number = float(text.replace(",", ""))
    low = _VERBS.sub("", raw.lower()).rstrip(":")
    if low in COUNTERS:
        return low, number
    if named["total"] is not None:  # `acc: 9820/10000`: a count of a total is a share
        number = number / float(named["total"]) if float(named["total"]) else number
    if unit in _TIME_UNITS:  # the unit belongs to the metric: `step_avg:42.13ms`
        return _timed(low, unit, number)
    name = _metric(low, split)
    if name is None and unit in UNIT_NAMES:
        return UNIT_NAMES[unit], number
    return None if name is None else (name, number)


_NUMBER_THEN_NAME = re.compile(rf"^(?P<num>{_NUMBER})\s+(?P<name>[A-Za-z][\w-]*)$")
_VERBS = re.compile(r"\s+(?:reached|is|was|of|=)$")
_TIME_UNITS = {"ms": 1.0, "s": 1000.0}
_STEP_TIMES = frozenset({"dt", "step_avg", "step_time", "time/step", "iter_dt", "time per step",
                         "ms/step", "ms/batch", "time/iter", "iter time"})
"""Names of the time one step took (`dt 512.3ms`, `step_avg:42.13ms`); a bare `time` may be an
epoch's (`| end of epoch 1 | time: 40.1s |`), so it keeps its name (`time_ms`)."""


def _timed(low: str, unit: str, number: float) -> tuple[str, float] | None:
    """A duration field as milliseconds, named by what it times."""
    milliseconds = number * _TIME_UNITS[unit]
    if low in _STEP_TIMES:
        return "step_time_ms", milliseconds
    name = re.sub(r"[^a-z0-9]+", "_", low).strip("_")
    return (f"{name}_ms", milliseconds) if name else None


def _metric(low: str, split: str) -> str | None:
    """The metric a field name stands for (`xent`, `valid_0 auc`, `dev auxiliary loss`)."""
    best = low.startswith("best ")
    if best:
        low = low[5:]
    field_split, bare = split_and_base(low, split)
    base = SHORT_NAMES.get(bare)
    if base is None and " " in bare:  # `auxiliary loss`, `average reward score`
        base = SHORT_NAMES.get(bare.rsplit(None, 1)[-1])
    if base is None:
        name = metric_name(bare.replace(" ", "_"), field_split)
        if name in STANDARD_NAMES:
            base = name.split("/", 1)[-1] if name.startswith(("train/", "val/", "test/")) else name
        elif any(word in bare for word in METRIC_WORDS):
            base = bare.replace(" ", "_")
        else:
            return None
    if best:
        return f"best/{base}"
    return base if "/" in base or base in SPLIT_FREE else f"{field_split}/{base}"

_RENAMES = {"xent": "train/loss", "avg.loss": "train/loss", "cost": "train/loss",
            "trl": "train/loss", "tel": "val/loss", "gnorm": "grad_norm", "norm": "grad_norm",
            "l.r.": "lr", "tps": "throughput/tokens_s", "sps": "throughput/samples_s"}
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
        elif name != "s":
            values.append((_RENAMES.get(name, name), value))
    if not values:
        return metric
    return LogMetric(tuple(values), step, metric.epoch, metric.taken_at,
                     metric.unparsed_values)


def read_better(line: str, metric: LogMetric | None) -> LogMetric | None:
    """What the generic reader makes of a normalised line, given what its pairs gave.

    Nothing from the pairs: the line may be a record (`parse_record_line`). Something: its
    short names get their meaning (`renamed`), and the record reading wins where it reads
    more, such as a step the pairs do not name (`Step 100/ 1000; acc: 4.10; ...`), names the
    pairs cut short (`Batch Loss: 1.92, Tokens per Sec: 3100`) or a time with its unit
    (`step_avg:42.13ms`).
    """
    if metric is None:
        return _record(line)
    metric = renamed(metric)
    if _may_read_better(metric, line):
        record = parse_record_line(line)
        if record is not None and _reading(record) > _reading(metric):
            return record
    return metric


_RECORD_HINT = re.compile(r" [:|] |;|\t|, ")
_UNIT_HINT = re.compile(r"\dm?s\b|\d%|\dms/")
_NUMBERS = re.compile(r"(?<![\w.])\d[\d.,]*")
_MAX_RECORD_CHARS = 512
_NOT_METRICS = re.compile(r"`|\.py:\d+: |Warning\b|\bWARN(?:ING)?\b|\bwarning\b|\bTip:")
"""Lines that are never metrics (as the key-value reader has them): code in backticks, Python
warnings, warning levels and tips."""


def _record(line: str) -> LogMetric | None:
    """`parse_record_line` of a short line with a digit in it, that is no warning or bar."""
    if len(line) > _MAX_RECORD_CHARS or not any(map(str.isdigit, line)):
        return None
    if _is_bar(line) or _NOT_METRICS.search(line) is not None:
        return None
    return parse_record_line(line)


def _is_bar(line: str) -> bool:
    """A progress bar: the progress formats' to read."""
    return "%|" in line or "it/s" in line or "s/it" in line


def _may_read_better(metric: LogMetric, line: str) -> bool:
    """Whether the record reader may read more of a line than its pairs gave.

    So it may where the line names a counter the pairs did not read, a number carries a unit,
    or a name is unknown on a line cut into fields.
    """
    if _is_bar(line) or len(line) > _MAX_RECORD_CHARS:
        return False
    if metric.step is None and metric.epoch is None and _has_counter_word(line):
        return True
    if _UNIT_HINT.search(line) is not None:  # `step_avg:42.13ms`, `dt 512.3ms`, `mfu 41.2%`
        return True
    if not all(name in STANDARD_NAMES for name, _ in metric.values):
        return _RECORD_HINT.search(line) is not None
    # `step 5 | loss 2.0 | norm 1.2 | sps 120.5`: fields the pairs left unread
    return (" | " in line or ";" in line) and len(_NUMBERS.findall(line)) > len(metric.values) + 2


def _reading(metric: LogMetric) -> int:
    """How much a reading of a line says: its counters, known metrics and step time."""
    known = sum(name in STANDARD_NAMES or name == "step_time_ms" for name, _ in metric.values)
    return known + (metric.step is not None) + (metric.epoch is not None)


def _has_counter_word(line: str) -> bool:
    """Whether a line names a step or epoch in words a record reads (`Step`, `Up.`, `Ep.`)."""
    low = line.lower()
    return "step" in low or "ep." in low or "up." in low or "iter" in low or "epoch" in low

"""What one field of a record reads as: `lm loss: 8.39`, `812.5 words/s`, `time (ms): 1378.0`."""

from __future__ import annotations

import re

from parsers.text import STANDARD_NAMES, metric_name
from parsers.vocabulary_short import (
    COUNTERS,
    EVALUATION_ONLY,
    METRIC_WORDS,
    SCALED_NAMES,
    SHORT_NAMES,
    SPLIT_FREE,
    UNIT_NAMES,
    is_count_or_setting,
    split_and_base,
)

NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# name, optional `:` or `=`, number, optional `/total`, optional unit
NAMED = re.compile(
    rf"^(?P<name>[A-Za-z][\w.@/()-]*(?:\s+[A-Za-z][\w.()-]*){{0,3}}?)(?:\s*[:=]\s*|\s+)"
    rf"(?:tensor\()?(?P<num>{NUMBER})\)?(?:\s*/\s*(?P<total>\d+))?"
    r"(?P<unit>%|[a-z]+(?:/[a-z]+)?)?(?P<rest>\s.*)?$"
)
# number then unit: `8082.72 words/s`, `12000/11000 tok/s` (the last count is the target's)
_UNITED = re.compile(
    rf"^(?:(?:{NUMBER})/)?(?P<num>{NUMBER})\s*"
    r"(?P<unit>[A-Za-z]+(?:/[A-Za-z]+)+|[A-Za-z]+ per [A-Za-z]+)$"
)
# a unit in brackets after the name: Megatron's `elapsed time per iteration (ms): 1378.0`
_UNIT_IN_NAME = re.compile(
    rf"^(?P<name>[A-Za-z][\w.-]*(?:\s+[A-Za-z][\w.-]*){{0,4}})\s*\((?P<unit>[a-z]{{1,3}})\)"
    rf"\s*[:=]\s*(?P<num>{NUMBER})$"
)
_ETA = re.compile(r"^(?:eta|ETA|remaining)\s*[:=]?\s*(?P<time>\d+:\d\d(?::\d\d)?)$")
"""`eta: 0:08:23`: the time left, as the key-value reader reads it (`eta_s`)."""
_WORD = re.compile(r"[A-Za-z]{2,}")

FieldRead = tuple[str, str, int, int, int, int, float]
"""(metric name or counter, how to read the number: `value`, `rate` (the number is a time per
step: `scale` / number) or `duration` (`h:mm:ss`), where the number is in the field, where its
total is or (0, 0), the scale to milliseconds or 1)."""


def read_field(field: str, split: str) -> FieldRead | None:
    """What one field reads as, or None for a field it cannot read.

    A field may run on after its number (Marian's `Cost 0.0638 * 898,943 after 35,885,885`);
    `prose_after` counts the words there.
    """
    if "'" in field:  # `valid_0's auc`, `'val_loss' reached`: read without the quotes
        return _unquoted(field, split)
    united = _UNITED.match(field)
    if united is not None:
        name = UNIT_NAMES.get(united["unit"].lower())
        return None if name is None else (name, "value", *united.span("num"), 0, 0, 1.0)
    then_name = _NUMBER_THEN_NAME.match(field)  # `21.3 bleu`
    if then_name is not None:
        name = _metric(then_name["name"].lower(), split)
        return None if name is None else (name, "value", *then_name.span("num"), 0, 0, 1.0)
    if ")" in field:
        bracketed = _UNIT_IN_NAME.match(field)
        if bracketed is not None:
            return _named(
                bracketed["name"], bracketed["unit"], bracketed.span("num"), (0, 0), split
            )
    if ":" in field and field[:1] in "eEr":
        eta = _ETA.match(field)
        if eta is not None:
            return ("eta_s", "duration", *eta.span("time"), 0, 0, 1.0)
    named = NAMED.match(field)
    if named is None:
        return None
    total = named.span("total") if named["total"] is not None else (0, 0)
    return _named(named["name"], named["unit"] or "", named.span("num"), total, split)


def _named(
    raw: str, unit: str, number_span: tuple[int, int], total: tuple[int, int], split: str
) -> FieldRead | None:
    """`read_field` of a field that is a name, its number and maybe a unit."""
    unit = unit.lower()
    low = _VERBS.sub("", raw.lower()).rstrip(":")
    anchored = _AT_COUNTER.search(low)  # `validation loss at iteration 100`: the step, no metric
    if anchored is not None and anchored["counter"] in COUNTERS:
        low = anchored["counter"]
    if low in COUNTERS:
        return (COUNTERS[low], "value", *number_span, 0, 0, 1.0)
    if unit in _TIME_UNITS:  # the unit belongs to the metric: `step_avg:42.13ms`
        if is_count_or_setting(low):
            return None  # a wall clock: `total: 1.2s`
        if _PER_STEP.search(low) is not None:  # `time per iteration (ms)`: a rate of steps
            return ("throughput/it_s", "rate", *number_span, 0, 0, 1000.0 / _TIME_UNITS[unit])
        name = _timed(low)
        return None if name is None else (name, "value", *number_span, *total, _TIME_UNITS[unit])
    scaled = SCALED_NAMES.get(low)
    if scaled is not None:  # `mtps 1.2`: million tokens a second
        return (scaled[0], "value", *number_span, 0, 0, scaled[1])
    name = _metric(low, split)
    if name is None and unit in UNIT_NAMES:
        name = UNIT_NAMES[unit]
    return None if name is None else (name, "value", *number_span, *total, 1.0)


def settled(field: str) -> bool:
    """Whether a field the reader does not read is still a field of the record, not prose.

    `consumed samples: 240`, `global batch size: 4`, `wpb 5574.176`: a name and its number,
    a count or a setting of the run rather than a metric, and no words after it.
    """
    named = NAMED.match(field)
    if named is None or named["rest"] is not None:
        return False
    name = named["name"]
    return " " not in name or ":" in field or "=" in field


def prose_after(field: str) -> int:
    """Words after the number of a field read by name (`... after 35,885,885`: one)."""
    if " " not in field:
        return 0
    named = NAMED.match(field)
    rest = None if named is None else named["rest"]
    return 0 if not rest else len(_WORD.findall(rest))


def placeholder(name: str, number: float) -> bool:
    """Whether a value is printed before there is one to print.

    `mfu -100.00%` (nanoGPT's, before its first estimate), `step_avg:nanms`, `iter_dt
    0.00ms` (no step timed yet), `ups 0` (fairseq's rounding of a slow rate).
    """
    if name == "mfu" or name.endswith("_ms") or name.startswith("throughput/"):
        return not number > 0  # NaN too
    return False


def _unquoted(field: str, split: str) -> FieldRead | None:
    """`read_field` of a field with quotes, each read as a blank (places stay the same)."""
    bare = field.replace("'", " ")
    stripped = bare.lstrip()
    read = read_field(stripped.rstrip(), split)
    if read is None:
        return None
    shift = len(bare) - len(stripped)
    name, how, start, end, total_start, total_end, scale = read
    return (
        name,
        how,
        start + shift,
        end + shift,
        total_start + shift if total_end else 0,
        total_end + shift if total_end else 0,
        scale,
    )


_NUMBER_THEN_NAME = re.compile(rf"^(?P<num>{NUMBER})\s+(?P<name>[A-Za-z][\w-]*)$")
_VERBS = re.compile(r"\s+(?:reached|is|was|of|to|value|=)$")
"""Words between a name and its number (`'val_loss' reached`, `learning rate to`, `lm loss
value`)."""
_AT_COUNTER = re.compile(r"\s(?:at|after|for)\s+(?P<counter>\S+)$")
"""A name that ends on `at <counter>` (Megatron's `validation loss at iteration 100`) names
where the record stands, not a metric; only counters the vocabulary knows are taken."""
_NAMED_SPLIT = re.compile(
    r"(?:train|training|trn|valid|validation|val|dev|eval|evaluation|test)(?:_\d+)?[\s_\-/]"
)
_LAST_WORD = re.compile(r"[\s-]+")
_TIME_UNITS = {"ms": 1.0, "s": 1000.0}
_PER_STEP = re.compile(r"\btime per (?:iteration|iter|step|batch|update)$")
_STEP_TIMES = frozenset(
    {
        "dt",
        "step_avg",
        "step_time",
        "time/step",
        "iter_dt",
        "time per step",
        "ms/step",
        "ms/batch",
        "time/iter",
        "iter time",
        "batch_cost",
    }
)
"""Names of the time one step took (`dt 512.3ms`, `step_avg:42.13ms`, Paddle's `batch_cost:
3.14s`); a bare `time` may be an
epoch's (`| end of epoch 1 | time: 40.1s |`), so it keeps its name (`time_ms`)."""


def _timed(low: str) -> str | None:
    """The name of a duration field in milliseconds, by what it times."""
    if low in _STEP_TIMES:
        return "step_time_ms"
    name = re.sub(r"[^a-z0-9]+", "_", low).strip("_")
    return f"{name}_ms" if name else None


def _metric(low: str, split: str) -> str | None:
    """The metric a field name stands for (`xent`, `valid_0 auc`, `dev auxiliary loss`)."""
    best = low.startswith(("best ", "best_"))
    if best:
        low = low[5:]
    if is_count_or_setting(low) or low in COUNTERS:
        return None  # `loss scale`, `global batch size`, `num_updates`: no metric
    field_split, bare = split_and_base(low, split)
    base = SHORT_NAMES.get(bare)
    if base is None and (" " in bare or "-" in bare):  # `auxiliary loss`, `lm-loss`
        base = SHORT_NAMES.get(_LAST_WORD.split(bare)[-1])
    if base is None:
        name = metric_name(bare.replace(" ", "_"), field_split)
        if name in STANDARD_NAMES:
            base = name.split("/", 1)[-1] if name.startswith(("train/", "val/", "test/")) else name
        elif any(word in bare for word in METRIC_WORDS) or (best and bare == "metric"):
            base = bare.replace(" ", "_")  # `best metric: 0.586`: PaddleClas's best-so-far
        else:
            return None
    if best:
        return f"best/{base}"
    if base in EVALUATION_ONLY and split == "train" and _NAMED_SPLIT.match(low) is None:
        field_split = "val"  # `precision: 0.11, recall: 0.19`: scored on held-out data only
    return base if "/" in base or base in SPLIT_FREE else f"{field_split}/{base}"

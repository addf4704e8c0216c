"""Generic `key: value` / `key=value` lines and JSON lines, the fallback formats."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from parsers import safe_json
from parsers.model import LogMetric
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
_NUM = (r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
        r"|[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)")
_PAIR = re.compile(
    r"(?<![\w/@.()-])([A-Za-z_][\w/@.()-]*)(?:\s*=\s*|\s*:\s+)"
    rf"('?{_NUM}'?%?|\d+:\d\d(?::\d\d)?)(?![\w.:/])"
)
_EPOCH_WORD = re.compile(r"\b[Ee]poch:?\s+\[?(\d+)\b(?!\s*[:=])")
_ISO_TS = re.compile(r"^\[?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?")
_RULE_CHARS = " \t=-*#~"
_RULE_STARTS = frozenset("=-*#~")
_LEADING_RULE = re.compile(r"[ \t=\-*#~]*")
_STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration", "it", "batch", "steps"})
_EPOCH_KEYS = frozenset({"epoch", "ep"})
_ETA_KEYS = frozenset({"eta", "eta_s", "remaining"})
_COUNTERS = {**dict.fromkeys(_STEP_KEYS, "step"), **dict.fromkeys(_EPOCH_KEYS, "epoch"),
             **dict.fromkeys(_ETA_KEYS, "eta")}
_STAMP_KEYS = frozenset({"time", "timestamp", "taken_at"})
ITER_TIME_KEYS = frozenset({"time", "iter_time", "batch_time"})
"""Seconds per iteration, reported as `throughput/it_s` by the formats that log them."""
SKIP_KEYS = frozenset({"data_time", "last_time", "last_data_time", "data", "v_num"})
_RECORD_KEYS = {**dict.fromkeys(_STAMP_KEYS | ITER_TIME_KEYS | SKIP_KEYS, "other"),
                **dict.fromkeys(_STEP_KEYS, "step"), **dict.fromkeys(_EPOCH_KEYS, "epoch")}
"""Keys a JSON record gives that may not be plain metric values."""
# Lines that are never metrics whatever pairs they hold: code in backticks, Python warnings
# (`file.py:12: UserWarning: ...`, Lightning's `rank_zero_warn`), warning levels and tips.
_NOT_METRICS = re.compile(r"`|\.py:\d+: |Warning\b|\bWARN(?:ING)?\b|\bwarning\b|\bTip:")
_NOT_METRICS_MARKERS = ("`", ".py:", "Warn", "WARN", "warn", "Tip:")
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
    """
    line = normalise_line(line)
    if ":" not in line and "=" not in line:
        return None
    # `===== epoch 3 =====` rules are decoration; a line of them alone costs a regex pass
    # over every `=` otherwise. `str.strip` takes 50 us on a 10,000-character rule: a
    # regex finds where a leading rule ends faster.
    if line[:1] in _RULE_STARTS:
        start = _LEADING_RULE.match(line).end()  # type: ignore[union-attr]
        body = line[start:].rstrip(_RULE_CHARS) if start < len(line) else ""
    else:
        body = line.strip(_RULE_CHARS)
    # a pair ends within a few characters of its separator: skip a long tail with none
    end = max(body.rfind("="), body.rfind(":")) + 64
    matches = list(_PAIR.finditer(body, 0, end))
    if matches and matches[-1].end() == end < len(body):
        # a value running past the window (`lr=1000...0`) would be read cut short
        whole = _PAIR.match(body, matches[-1].start())
        matches[-1:] = [whole] if whole is not None else []
    if not matches or _not_metrics(body, end):
        return None
    pairs = [(m[1], m[2]) for m in matches if not _is_config_key(m[1])]
    if not pairs or _prose_words(body, matches) > _allowed_words(pairs):
        return None
    metric = pairs_to_metric(pairs, taken_at=_timestamp(line))
    if metric is not None and metric.epoch is None and "poch" in line:
        epoch = _EPOCH_WORD.search(line)  # `Epoch 3 | loss: ...`
        if epoch is not None:
            return LogMetric(metric.values, metric.step, to_epoch(float(epoch[1])),
                             metric.taken_at)
    return metric


def _not_metrics(body: str, end: int) -> bool:
    # substrings first: the regex alone costs more than parsing the rest of the line
    head = body[:end]
    if not any(marker in head for marker in _NOT_METRICS_MARKERS):
        return False
    return _NOT_METRICS.search(head) is not None


def _is_known(key: str) -> bool:
    return key.lower() in _COUNTERS or metric_name(key) in STANDARD_NAMES


def _is_config_key(key: str) -> bool:
    return key[:1].isupper() and _CONFIG_KEY.fullmatch(key) is not None and not _is_known(key)


def _allowed_words(pairs: list[tuple[str, str]]) -> int:
    if any(_is_known(key) for key, _ in pairs):
        return MAX_PROSE_WORDS
    return 1 if len(pairs) > 1 else 0  # `INFO foo=1 bar=2`, not `Total FLOPs: 0`


def _prose_words(body: str, matches: list[re.Match[str]]) -> int:
    """Words in `body` outside the pairs (a long tail counts by its first 256 characters)."""
    pieces = []
    start = 0
    for match in matches:
        pieces.append(body[start:match.start()])
        start = match.end()
    pieces.append(body[start:start + 256])
    return len(_WORD.findall(" ".join(pieces)))


def pairs_to_metric(
    pairs: list[tuple[str, str]], split: str = "train", taken_at: float | None = None
) -> LogMetric | None:
    """Build a metric from (key, text) pairs, lifting step/epoch/ETA counters out of the values.

    Raises:
        ValueError: a value that is not a number, or a step or epoch that is no count.
    """
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    for key, text in pairs:
        counter = _COUNTERS.get(key.lower())
        if counter is None:
            if ":" not in text:  # `12:30` is a time of day or a duration, not a value
                values.append((metric_name(key, split), parse_number(text)))
        elif ":" in text:
            if counter == "eta":
                values.append(("eta_s", parse_duration(text)))
        elif counter == "step":
            step = to_step(parse_number(text))
        elif counter == "epoch":
            epoch = to_epoch(parse_number(text))
        else:
            values.append((metric_name(key, split), parse_number(text)))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _timestamp(line: str) -> float | None:
    match = _ISO_TS.match(line)
    if match is None:
        return None
    seconds = local_timestamp(match[1], match[2])
    if seconds is None:
        return None
    return seconds + float("0." + match[3]) if match[3] else seconds


def parse_jsonl_line(line: str) -> LogMetric | None:
    """Parse one JSON object per line; numeric (or numeric-string) fields become metrics.

    Raises:
        ValueError: the line starts like an object but is not valid JSON (or nests deeper
            than `safe_json.MAX_DEPTH`), or its step or epoch is no count.
    """
    line = normalise_line(line).strip()
    if not line.startswith("{"):
        return None
    record = safe_json.loads(line)
    if not isinstance(record, dict):
        return None
    return record_to_metric(record)


def record_to_metric(
    record: dict, split: str = "train", iter_time: bool = False
) -> LogMetric | None:
    """Build a metric from a decoded JSON record (nested dicts are flattened with `/`).

    Args:
        record: the decoded object.
        split: the split bare keys such as `loss` belong to.
        iter_time: the record's `time` is seconds per iteration (mmengine, detectron2), so it
            becomes `throughput/it_s`; timing bookkeeping such as `data_time` is dropped.

    An integer too large for a float is infinite, as `float("1e400")` is. A `time` or
    `timestamp` in Unix seconds or milliseconds becomes `taken_at`.

    Raises:
        ValueError: a step or epoch that is no count (see `parsers.values.to_step`).
    """
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    taken_at: float | None = None
    for key, raw in _items(record):
        number: float | None
        if type(raw) is float:  # the common case first: exact type checks, no bool trap
            number = raw
        elif type(raw) is int:
            number = _int_to_float(raw)
        else:
            number = _as_number(raw)
        if number is None:
            continue
        low = key.lower()
        special = _RECORD_KEYS.get(low)
        if special is None:
            values.append((metric_name(key, split), number))
        elif special == "step":
            step = to_step(number)
        elif special == "epoch":
            epoch = to_epoch(number)
        elif low in _STAMP_KEYS and 1e9 < number < 1e14:
            taken_at = number if number < 1e11 else number / 1000.0  # seconds or milliseconds
        elif iter_time and low in ITER_TIME_KEYS:
            if number > 0:
                values.append(("throughput/it_s", 1.0 / number))
        elif not (iter_time and low in SKIP_KEYS):
            values.append((metric_name(key, split), number))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _items(record: dict) -> Iterable[tuple[str, object]]:
    """The record's (key, value) pairs, nested objects flattened (rare: checked first)."""
    for value in record.values():
        if type(value) is dict:
            return _flatten(record)
    return record.items()


def _flatten(record: dict, prefix: str = "") -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = []
    for key, value in record.items():
        if isinstance(value, dict):
            items.extend(_flatten(value, f"{prefix}{key}/"))
        else:
            items.append((f"{prefix}{key}", value))
    return items


def _int_to_float(raw: int) -> float:
    try:
        return float(raw)
    except OverflowError:  # beyond 1.8e308
        return math.inf if raw > 0 else -math.inf


def _as_number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return _int_to_float(raw)
    if isinstance(raw, float):
        return raw
    if isinstance(raw, str):
        try:
            return parse_number(raw)
        except ValueError:
            return None
    return None

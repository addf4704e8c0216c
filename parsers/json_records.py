"""JSON lines and decoded JSON records: one object per line, numeric fields become metrics."""

from __future__ import annotations

import math
from collections.abc import Iterable

from parsers import safe_json
from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line, parse_number
from parsers.values import to_epoch, to_step

STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration", "it", "batch", "steps"})
"""Keys whose value is the step, in JSON records and in `key=value` lines."""
EPOCH_KEYS = frozenset({"epoch", "ep"})
"""Keys whose value is the epoch, in JSON records and in `key=value` lines."""
_STAMP_KEYS = frozenset({"time", "timestamp", "taken_at"})
ITER_TIME_KEYS = frozenset({"time", "iter_time", "batch_time"})
"""Seconds per iteration, reported as `throughput/it_s` by the formats that log them."""
SKIP_KEYS = frozenset({"data_time", "last_time", "last_data_time", "data", "v_num"})
_RECORD_KEYS = {
    **dict.fromkeys(_STAMP_KEYS | ITER_TIME_KEYS | SKIP_KEYS, "other"),
    **dict.fromkeys(STEP_KEYS, "step"),
    **dict.fromkeys(EPOCH_KEYS, "epoch"),
}
"""Keys a JSON record gives that may not be plain metric values."""

_KeyInfo = tuple["str | None", str, str]
"""(`step`, `epoch`, `other` from `_RECORD_KEYS` or None, the key lower-cased, its metric
name)."""
_KEY_INFO: dict[str, dict[str, _KeyInfo]] = {}
"""Per split, what each key seen so far is: a record repeats the same few keys."""
_KEY_INFO_SIZE = 4096


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
    keys = _KEY_INFO.get(split) or _KEY_INFO.setdefault(split, {})
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
        special, low, name = keys.get(key) or _key_info(keys, key, split)
        if special is None:
            values.append((name, number))
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
            values.append((name, number))
    if not values:
        return None
    return LogMetric(tuple(values), step, epoch, taken_at)


def _key_info(keys: dict[str, _KeyInfo], key: str, split: str) -> _KeyInfo:
    """What `key` is, worked out once per split and distinct key."""
    low = key.lower()
    if len(keys) >= _KEY_INFO_SIZE:  # keys come from logs: keep the cache bounded
        keys.clear()
    info = keys[key] = (_RECORD_KEYS.get(low), low, metric_name(key, split))
    return info


def _items(record: dict) -> Iterable[tuple[str, object]]:
    """The record's (key, value) pairs, nested objects flattened (rare: checked first)."""
    if dict in map(type, record.values()):  # one pass in C: `type(value) is dict` for any
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

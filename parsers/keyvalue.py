"""Generic `key: value` / `key=value` lines and JSON lines, the fallback formats."""

from __future__ import annotations

import json
import math
import re

from parsers.model import LogMetric
from parsers.text import (
    local_timestamp,
    metric_name,
    normalise_line,
    parse_duration,
    parse_number,
)

_NUM = r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)"
_PAIR = re.compile(
    r"(?<![\w/@.()-])([A-Za-z_][\w/@.()-]*)(?:\s*=\s*|\s*:\s+)"
    rf"('?{_NUM}'?%?|\d+:\d\d(?::\d\d)?)(?![\w.:])",
    re.IGNORECASE,
)
_EPOCH_WORD = re.compile(r"\b[Ee]poch:?\s+\[?(\d+)\b(?!\s*[:=])")
_ISO_TS = re.compile(r"^\[?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?")
_RULE_CHARS = " \t=-*#~"
_STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration", "it", "batch", "steps"})
_EPOCH_KEYS = frozenset({"epoch", "ep"})
_ETA_KEYS = frozenset({"eta", "eta_s", "remaining"})
ITER_TIME_KEYS = frozenset({"time", "iter_time", "batch_time"})
"""Seconds per iteration, reported as `throughput/it_s` by the formats that log them."""
SKIP_KEYS = frozenset({"data_time", "last_time", "last_data_time", "data", "v_num"})


def parse_generic_line(line: str) -> LogMetric | None:
    """Parse any `key: value` or `key=value` pairs with numeric values on one line.

    Counters such as `step`, `iter` and `epoch` become the metric's step and epoch; an ISO
    timestamp at the start of the line becomes `taken_at` (local time when it has no zone).
    """
    line = normalise_line(line)
    if ":" not in line and "=" not in line:
        return None
    # `===== epoch 3 =====` rules are decoration; a line of them alone costs a regex pass
    # over every `=` otherwise
    body = line.strip(_RULE_CHARS)
    # a pair ends within a few characters of its separator: skip a long tail with none
    end = max(body.rfind("="), body.rfind(":")) + 64
    pairs = _PAIR.findall(body, 0, end)
    if not pairs:
        return None
    metric = pairs_to_metric(pairs, taken_at=_timestamp(line))
    if metric is not None and metric.epoch is None:
        epoch = _EPOCH_WORD.search(line)  # `Epoch 3 | loss: ...`
        if epoch is not None:
            return LogMetric(metric.values, metric.step, float(epoch[1]), metric.taken_at)
    return metric


def pairs_to_metric(
    pairs: list[tuple[str, str]], split: str = "train", taken_at: float | None = None
) -> LogMetric | None:
    """Build a metric from (key, text) pairs, lifting step/epoch/ETA counters out of the values.

    Raises:
        ValueError: a value that is not a number.
    """
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    for key, text in pairs:
        low = key.lower()
        if low in _ETA_KEYS and ":" in text:
            values.append(("eta_s", parse_duration(text)))
        elif ":" in text:
            continue
        elif low in _STEP_KEYS:
            step = int(parse_number(text))
        elif low in _EPOCH_KEYS:
            epoch = parse_number(text)
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
        ValueError: the line starts like an object but is not valid JSON.
    """
    line = normalise_line(line).strip()
    if not line.startswith("{"):
        return None
    record = json.loads(line)  # json.JSONDecodeError is a ValueError
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
    """
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    taken_at: float | None = None
    for key, raw in _flatten(record):
        number = _as_number(raw)
        if number is None:
            continue
        low = key.lower()
        if low in _STEP_KEYS:
            step = int(number) if math.isfinite(number) else None
        elif low in _EPOCH_KEYS:
            epoch = number
        elif low in ("time", "timestamp", "taken_at") and number > 1e9:
            taken_at = number
        elif iter_time and low in ITER_TIME_KEYS:
            if number > 0:
                values.append(("throughput/it_s", 1.0 / number))
        elif iter_time and low in SKIP_KEYS:
            continue
        else:
            values.append((metric_name(key, split), number))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _flatten(record: dict, prefix: str = "") -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = []
    for key, value in record.items():
        if isinstance(value, dict):
            items.extend(_flatten(value, f"{prefix}{key}/"))
        else:
            items.append((f"{prefix}{key}", value))
    return items


def _as_number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        try:
            return parse_number(raw)
        except ValueError:
            return None
    return None

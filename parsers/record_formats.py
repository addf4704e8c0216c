"""JSON-lines logs of one vocabulary: DETR/DeiT `log.txt`, LLaMA-Factory `trainer_log.jsonl`."""

from __future__ import annotations

from parsers import safe_json
from parsers.json_records import record_to_metric
from parsers.model import LogMetric
from parsers.text import normalise_line, parse_duration


def _record_text(line: str) -> str:
    """The line's JSON text; uncut, as a record line holds no redraws or colours to clean.

    A DETR record with every decoder layer's losses runs past `MAX_LINE_CHARS`, where
    `normalise_line` would cut it in the middle of the object.
    """
    if line.startswith("{") and "\r" not in line and "\x1b" not in line:
        return line.rstrip("\n").strip()
    return normalise_line(line).strip()


COCO_EVAL_NAMES = ("val/map", "val/map_50")
"""What the first entries of a COCO `stats` array are (pycocotools `COCOeval.summarize`):
AP at IoU 0.50:0.95, then AP at IoU 0.50. The other ten (AP75, by area, recalls) are left out."""

_DETR_SKIP = frozenset({"n_parameters"})
_PERCENT_KEYS = {
    "test_acc1": "val/acc",
    "test_acc5": "val/acc_top5",
    "train_acc1": "train/acc",
    "train_acc5": "train/acc_top5",
}
"""DeiT and MAE print top-1/top-5 accuracy in percent (`utils.accuracy` * 100)."""
_DETR_NAMES = {"train_lr": "lr", "test_loss": "val/loss"}
"""In these logs `test_` is the evaluation run on the validation set (COCO val2017, ImageNet
val): it is the validation side."""


def parse_detr_json_line(line: str) -> LogMetric | None:
    """One epoch record of a DETR/Deformable-DETR/DeiT/MAE `log.txt` (`main.py`'s `log_stats`).

    `test_coco_eval_bbox` becomes `val/map` and `val/map_50` (its entries 0 and 1); DeiT's
    percentages `test_acc1`/`test_acc5` become the fractions `val/acc`/`val/acc_top5`;
    `n_parameters` is the model size, not a metric.

    Raises:
        ValueError: the line starts like an object but is not JSON, or its epoch is no count.
    """
    record = _json_object(line)
    if record is None:
        return None
    extra: list[tuple[str, float]] = []
    plain: dict[str, object] = {}
    for key, value in record.items():
        key = str(key)  # JSON object keys are strings; said for the type checker
        if key in _DETR_SKIP:
            continue
        if isinstance(value, list) and key.endswith("coco_eval_bbox"):
            prefix = "" if key.startswith("test_") else key[: -len("test_coco_eval_bbox")]
            pairs = zip(COCO_EVAL_NAMES, value[: len(COCO_EVAL_NAMES)], strict=False)
            extra.extend((prefix + name, float(v)) for name, v in pairs if type(v) in (int, float))
        elif (
            key in _PERCENT_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool)
        ):
            extra.append((_PERCENT_KEYS[key], float(value) / 100.0))
        else:
            plain[_DETR_NAMES.get(key, key)] = value
    metric = record_to_metric(plain)
    if metric is None:
        return LogMetric(tuple(extra)) if extra else None
    return LogMetric(metric.values + tuple(extra), metric.step, metric.epoch, metric.taken_at)


_LF_SKIP = frozenset(
    {
        "total_steps",
        "percentage",
        "elapsed_time",
        "remaining_time",
        "total_tokens",
        "throughput",
        "current_steps",
    }
)


def parse_llamafactory_line(line: str) -> LogMetric | None:
    """One record of LLaMA-Factory's `trainer_log.jsonl` (its `LogCallback`).

    `current_steps` is the step; `remaining_time` (`0:01:03`, `3 days, 17:51:32`) becomes
    `eta_s`; `throughput` is tokens per second; `total_steps` stays a value (the progress
    denominator); the other keys are named as in a Trainer log (`eval_loss` is `val/loss`).

    Raises:
        ValueError: the line starts like an object but is not JSON, or its step is no count.
    """
    record = _json_object(line)
    if record is None:
        return None
    plain = {key: value for key, value in record.items() if key not in _LF_SKIP}
    # names `record_to_metric` passes through unchanged
    if "current_steps" in record:
        plain["step"] = record["current_steps"]
    if "total_steps" in record:
        plain["total_steps"] = record["total_steps"]
    if "throughput" in record:
        plain["throughput/tokens_s"] = record["throughput"]
    remaining = record.get("remaining_time")
    if isinstance(remaining, str):
        try:
            plain["eta_s"] = parse_duration(remaining)
        except ValueError:
            pass  # LLaMA-Factory writes its own durations; an odd one is no ETA, not a bad line
    return record_to_metric(plain)


def _json_object(line: str) -> dict[str, object] | None:
    """The JSON object a record line holds, or `None` for a line that is not one.

    Raises:
        ValueError: the line starts like an object but is not JSON.
    """
    text = _record_text(line)
    if not text.startswith("{"):
        return None
    record = safe_json.loads(text)
    return record if isinstance(record, dict) else None

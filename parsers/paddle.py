"""PaddleOCR and PaddleClas `train.log` lines (also what they print on the console)."""

from __future__ import annotations

import re

from parsers.keyvalue import parse_plain_line
from parsers.model import LogMetric
from parsers.text import local_stamp, metric_name, normalise_line, parse_duration, parse_number
from parsers.values import to_epoch, to_step

_STAMP = re.compile(r"\[?(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\]")
# PaddleOCR: `ppocr INFO: epoch: [1/200], global_step: 10, lr: 0.000006, loss: 1.87, ...`
_OCR_EPOCH = re.compile(r"epoch: \[(\d+)/\d+\], ")
_OCR_EVAL = re.compile(r"(cur|best) metric, ")
# PaddleClas: `[Train][Epoch 1/120][Iter: 0/5005]lr(PiecewiseDecay): 0.1, top1: ...`,
# `[Eval][Epoch 1][Avg]CELoss: ...`, `[Eval][Epoch 1][best metric: 0.0123]`
_CLAS = re.compile(
    r"\[(Train|Eval)\]\[Epoch (\d+)(?:/\d+)?\]"
    r"(?:\[(?:Iter: *\d+/\d+|Avg)\]|\[best metric: ([^\]]+)\])"
)
_ETA = re.compile(r"eta: (\d+ days?, [\d:]+|[\d:]+)")
# `print_dict` of both projects logs the YAML config at start-up, one `key : value` a line,
# nested keys indented: a blank before the colon, which their metric lines never have
_CONFIG_LINE = re.compile(r"(?:.* INFO: )?\s*[\w.-]+ :(?: |$)")
# costs of one batch, sample counts and memory: not metrics of the run
_SKIP = frozenset(
    {
        "avg_reader_cost",
        "avg_batch_cost",
        "avg_samples",
        "batch_cost",
        "reader_cost",
        "max_mem_reserved",
        "max_mem_allocated",
        "global_step",
        "best_epoch",
        "eta",
        "epoch",
    }
)


def parse_paddle_line(line: str) -> LogMetric | None:
    """Parse a PaddleOCR or PaddleClas training or evaluation line.

    `global_step` is the step and `epoch: [e/N]` or `[Epoch e/N]` the epoch; `ips` (samples
    a second) is `throughput/samples_s`, `eta` `eta_s`, `top1`/`top5` are `acc`/`acc_top5`.
    PaddleOCR's `cur metric, precision: ...` and PaddleClas' `[Eval]` lines are validation
    values; a `best metric` line gives `best/<name>`, at the epoch it names.

    Raises:
        ValueError: a value that is not a number.
    """
    line = normalise_line(line)
    _, found, body = line.partition(" INFO: ")
    if not found:
        return None
    stamp = _STAMP.match(line)
    taken_at = local_stamp(stamp[1]) if stamp else None
    if body.startswith("epoch: ["):
        match = _OCR_EPOCH.match(body)
        if match is None:
            return None
        return _metric(body[match.end() :], "train", to_epoch(float(match[1])), taken_at)
    if body.startswith(("[Train]", "[Eval]")):
        match = _CLAS.match(body)
        if match is None:
            return None
        epoch = to_epoch(float(match[2]))
        if match[3] is not None:
            return LogMetric(
                values=(("best/metric", parse_number(match[3])),), epoch=epoch, taken_at=taken_at
            )
        split = "train" if match[1] == "Train" else "val"
        return _metric(body[match.end() :], split, epoch, taken_at)
    match = _OCR_EVAL.match(body)
    if match is not None:
        split = "val" if match[1] == "cur" else "best"
        best = re.search(r"best_epoch: (\d+)", body) if split == "best" else None
        return _metric(
            body[match.end() :], split, to_epoch(float(best[1])) if best else None, taken_at
        )
    return None


def _metric(text: str, split: str, epoch: float | None, taken_at: float | None) -> LogMetric | None:
    values: list[tuple[str, float]] = []
    step = None
    eta = _ETA.search(text)
    for item in (eta and text[: eta.start()] + text[eta.end() :] or text).split(", "):
        key, colon, value = item.partition(": ")
        key = key.strip()
        if not colon or not key:
            continue
        if key == "global_step":
            step = to_step(parse_number(value))
        elif key not in _SKIP and not (split == "best" and key == "fps"):
            values.append((_name(key, split), parse_number(value.split()[0])))
    if eta is not None and split == "train":
        values.append(("eta_s", parse_duration(eta[1])))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _name(key: str, split: str) -> str:
    if key.startswith("lr"):  # `lr(PiecewiseDecay)`: the schedule in brackets
        return "lr"
    if key in ("ips", "fps"):
        return "throughput/samples_s" if split == "train" else "eval/throughput/samples_s"
    if split == "best":
        return f"best/{key}"
    known = metric_name(key, split)
    return known if "/" in known or split == "train" else f"{split}/{key}"


def parse_paddle_plain_line(line: str) -> LogMetric | None:
    """`keyvalue.parse_plain_line` of a Paddle log's other lines, but its config dump.

    PaddleClas and PaddleOCR print their YAML config at start-up as `key : value` lines
    (`[2022/04/04 17:51:03] root INFO:     epochs : 20`, `learning_rate : 0.0125`): settings,
    not metrics, though their keys name an epoch or a learning rate.
    """
    if " :" in line and _CONFIG_LINE.match(normalise_line(line)):
        return None
    return parse_plain_line(line)

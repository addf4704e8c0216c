"""Line formats of single-purpose training scripts: nanoGPT, torchvision references and timm."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line, parse_duration, parse_number

_NANO_ITER = re.compile(r"iter (\d+): loss (\S+), time ([\d.]+)ms(?:, mfu (-?[\d.]+)%)?")
_NANO_EVAL = re.compile(r"step (\d+): train loss (\S+), val loss (\S+)")


def parse_nanogpt_line(line: str) -> LogMetric | None:
    """Parse nanoGPT's `iter N: loss L, time Tms, mfu M%` and `step N: train loss ..., val loss`.

    nanoGPT prints `mfu -100.00%` until it has measured five iterations; that placeholder is
    left out.

    Raises:
        ValueError: a loss that is not a number.
    """
    line = normalise_line(line)
    if line.startswith("iter "):
        match = _NANO_ITER.match(line)
        if match is None:
            return None
        values = [("train/loss", parse_number(match[2].rstrip(",")))]
        time_ms = float(match[3])
        if time_ms > 0:
            values.append(("throughput/it_s", 1000.0 / time_ms))
        if match[4] is not None and float(match[4]) != -100.0:
            values.append(("mfu_pct", float(match[4])))
        return LogMetric(values=tuple(values), step=int(match[1]))
    if line.startswith("step "):
        match = _NANO_EVAL.match(line)
        if match is None:
            return None
        values = [
            ("train/loss", parse_number(match[2].rstrip(","))),
            ("val/loss", parse_number(match[3])),
        ]
        return LogMetric(values=tuple(values), step=int(match[1]))
    return None


_ML_HEAD = re.compile(
    r"(?P<header>.*?)\s*\[\s*(?P<i>\d+)/(?P<n>\d+)\]\s+eta: (?P<eta>\d+ days?, [\d:]+|[\d:]+)\s+"
)
_ML_PAIR = re.compile(r"(\S+(?: mem)?):\s+(\S+)(?:\s+\(\s*([^)\s]+)\))?")
_ML_SUMMARY = re.compile(r"(?:Test:.*?|\s*\*)\s+Acc@1 (\S+) Acc@5 (\S+)")
_ML_EPOCH = re.compile(r"Epoch: \[(\d+)\]")
_TIMM_TRAIN = re.compile(
    r"Train: (\d+) \[\s*(\d+)/(\d+)\s*\(\s*\d+%\)\]\s+Loss: (\S+) \(\s*\S+\)\s+"
    r"Time: [\d.]+s,\s*([\d.]+)/s\s.*?LR: (\S+)"
)
_TIMM_TEST = re.compile(r"Test(?: \(EMA\))?: \[\s*(\d+)/(\d+)\]\s+(.*)")


def parse_metric_logger_line(line: str) -> LogMetric | None:
    """Parse torchvision-reference `MetricLogger` lines and timm `train.py` Train/Test lines.

    Training lines report the logger's smoothed value (the first number); evaluation lines
    report the running average over the evaluation set (the number in brackets), so the last
    evaluation line holds the final result.

    Raises:
        ValueError: a value that is not a number.
    """
    line = normalise_line(line)
    if line.startswith("Train: "):
        match = _TIMM_TRAIN.match(line)
        if match is None:
            return None
        values: tuple[tuple[str, float], ...] = (
            ("train/loss", parse_number(match[4])),
            ("throughput/samples_s", float(match[5])),
            ("lr", parse_number(match[6])),
        )
        return LogMetric(values=values, epoch=float(match[1]))
    if "Acc@1 " in line:
        match = _ML_SUMMARY.match(line)
        if match is None:
            return None
        values = (("val/acc", parse_number(match[1])), ("val/acc_top5", parse_number(match[2])))
        return LogMetric(values=values)
    if "eta: " in line:
        return _torchvision_line(line)
    if line.startswith("Test"):
        match = _TIMM_TEST.match(line)
        return None if match is None else _pairs_metric(match[3], "val", None)
    return None


def _torchvision_line(line: str) -> LogMetric | None:
    head = _ML_HEAD.match(line)
    if head is None:
        return None
    header = head["header"]
    split = "val" if header.lstrip().startswith("Test") else "train"
    epoch_match = _ML_EPOCH.search(header)
    epoch = float(epoch_match[1]) if epoch_match else None
    metric = _pairs_metric(line[head.end() :], split, epoch)
    eta = ("eta_s", parse_duration(head["eta"]))
    if split == "val":
        return metric
    if metric is None:
        return LogMetric(values=(eta,), epoch=epoch)
    return LogMetric(values=(*metric.values, eta), epoch=epoch)


def _pairs_metric(rest: str, split: str, epoch: float | None) -> LogMetric | None:
    values: list[tuple[str, float]] = []
    for key, value, average in _ML_PAIR.findall(rest):
        low = key.lower().rstrip(":")
        if low == "time":
            seconds = parse_number(value.rstrip("s,"))
            if seconds > 0 and split == "train":
                values.append(("throughput/it_s", 1.0 / seconds))
        elif low == "max mem":
            values.append(("max_mem_mb", parse_number(value)))
        elif low not in ("data", "data_time"):
            text = average if split == "val" and average else value
            values.append((metric_name(key, split), parse_number(text)))
    return LogMetric(values=tuple(values), epoch=epoch) if values else None

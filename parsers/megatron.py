"""Megatron-LM and Megatron-DeepSpeed iteration lines, and DeepSpeed's `log_dist` step lines."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.text import local_stamp, metric_name, normalise_line, parse_number
from parsers.values import to_step

_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s*")
_ITERATION = re.compile(r"iteration\s+(\d+)/\s*\d+\s*\|")
_VALIDATION = re.compile(r"validation loss at (?:iteration (\d+)|the end of training)[^|]*\|")
_LOG_DIST = re.compile(r"\[Rank \d+\] step=(\d+), skipped=(\d+), lr=\[([^,\]]+)")
# DeepSpeed's throughput timer: `epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=
# 25.02, CurrSamplesPerSec=25.70, ...` (`0/20, RunningAvg...` in DeepSpeed before 0.7.3)
_TIMER = re.compile(
    r"(?:global_step=(\d+)|\] \d+/(\d+)), RunningAvgSamplesPerSec=[^,]*, "
    r"CurrSamplesPerSec=([^,\s]+)"
)
# Names as the iteration line writes them; keys not here keep their own name (spaces become
# `_`), and `None` marks counters and settings that are not metrics.
_KEYS: dict[str, str | None] = {
    "lm loss": "train/loss",
    "lm-loss": "train/loss",  # Megatron-DeepSpeed's 3D-parallel fork
    "learning rate": "lr",
    "grad norm": "grad_norm",
    "params norm": "params_norm",
    "throughput per gpu (tflop/s/gpu)": "tflops_per_gpu",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
    "consumed samples": None,
    "consumed tokens": None,
    "global batch size": None,
    "current time": None,
    "loss scale": None,  # the fp16 scaler's factor: not a loss, and -1 without one
    "num zeros": None,
    "elapsed time per iteration (ms)": None,  # becomes throughput, below
}


def parse_megatron_line(line: str) -> LogMetric | None:
    """Parse a Megatron iteration or validation line, or a DeepSpeed step or timer line.

    ` iteration 100/ 500000 | ... | elapsed time per iteration (ms): 1234.5 | ... | lm loss:
    7.123456E+00 | ...`: the step, every `key: value` (losses in E-notation), and the time per
    iteration as `throughput/it_s` (and `throughput/samples_s` with the global batch size).
    ` validation loss at iteration 1000 | lm loss value: ... | lm loss PPL: ...`: `val/loss`
    and `val/ppl` at that step. DeepSpeed's `[Rank 0] step=10, skipped=0, lr=[...],
    ...` gives the first group's `lr`, its timer's `CurrSamplesPerSec=` `throughput/samples_s`.

    Raises:
        ValueError: a value that is not a number.
    """
    line = normalise_line(line)
    if "|" in line:
        at = line.find("iteration")
        if at >= 0:
            head = line[:at]
            match = _ITERATION.match(line, at)
            if match is not None and (not head.strip() or _STAMP.fullmatch(head)):
                return _iteration(line, match, _taken_at(head))
            match = _VALIDATION.search(line)
            if match is not None:
                return _validation(line, match, _taken_at(line))
    if "step=" in line and "[Rank " in line:
        match = _LOG_DIST.search(line)
        if match is not None:
            return _log_dist(line, match)
    if "CurrSamplesPerSec=" in line:
        match = _TIMER.search(line)
        if match is not None:
            step = match[1] or match[2]
            return LogMetric(
                values=(("throughput/samples_s", parse_number(match[3])),),
                step=to_step(float(step)),
                taken_at=_taken_at(line),
            )
    return None


def _pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for field in text.split("|"):
        key, colon, value = field.partition(":")
        if colon and value.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def _iteration(line: str, match: re.Match[str], taken_at: float | None) -> LogMetric | None:
    values: list[tuple[str, float]] = []
    iteration_ms = batch = None
    for key, text in _pairs(line[match.end() :]):
        low = key.lower()
        if low == "elapsed time per iteration (ms)":
            iteration_ms = parse_number(text)
        elif low == "global batch size":
            batch = parse_number(text)
        elif low in _KEYS:
            name = _KEYS[low]
            if name is not None:
                values.append((name, parse_number(text)))
        else:
            values.append((metric_name(key.replace(" ", "_")), parse_number(text)))
    if iteration_ms is not None and iteration_ms > 0:
        values.append(("throughput/it_s", 1000.0 / iteration_ms))
        if batch is not None:
            values.append(("throughput/samples_s", batch * 1000.0 / iteration_ms))
    if not values:
        return None
    return LogMetric(values=tuple(values), step=to_step(float(match[1])), taken_at=taken_at)


def _validation(line: str, match: re.Match[str], taken_at: float | None) -> LogMetric | None:
    values: list[tuple[str, float]] = []
    for key, text in _pairs(line[match.end() :]):
        low = key.lower()
        if low.endswith(" ppl"):
            values.append(
                (
                    "val/ppl"
                    if low == "lm loss ppl"
                    else metric_name(f"val/{key[:-4].replace(' ', '_')}_ppl"),
                    parse_number(text),
                )
            )
        elif low.endswith(" value"):
            values.append(
                (
                    "val/loss"
                    if low == "lm loss value"
                    else metric_name(f"val/{key[:-6].replace(' ', '_')}"),
                    parse_number(text),
                )
            )
    if not values:
        return None
    step = to_step(float(match[1])) if match[1] else None
    return LogMetric(values=tuple(values), step=step, taken_at=taken_at)


def _log_dist(line: str, match: re.Match[str]) -> LogMetric:
    # `lr=[0.0001, 0.0001]`: one rate per parameter group; the first is the one schedules show
    return LogMetric(
        values=(("lr", parse_number(match[3])),),
        step=to_step(float(match[1])),
        taken_at=_taken_at(line),
    )


def _taken_at(text: str) -> float | None:
    stamp = _STAMP.match(text) if text.startswith("[") else None
    return local_stamp(stamp[1]) if stamp else None

"""Health findings that one log line (or one parsed metric) supports on its own."""

from __future__ import annotations

import math
import re

from parsers.model import LogFinding, LogMetric
from parsers.text import normalise_line

# One alternation runs per line; most lines match nothing, so this stays the cheap path.
_TRIGGER = re.compile(
    r"out of memory|OutOfMemoryError|can't allocate memory|"
    r"Traceback \(most recent call last\)|Downloading|"
    r"Fetching \d+ files|\.(?:safetensors|bin|pt|pth|zip|gz): +\d+%|"
    r"NCCL (?:error|WARN)|Watchdog caught collective operation timeout|"
    r"RuntimeError: CUDA error|Killed$|Segmentation fault",
    re.IGNORECASE,
)
_KINDS = (
    ("oom", re.compile(r"out of memory|OutOfMemoryError|can't allocate memory", re.IGNORECASE)),
    ("traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("nccl", re.compile(r"NCCL (?:error|WARN)|Watchdog caught collective", re.IGNORECASE)),
    ("cuda_error", re.compile(r"RuntimeError: CUDA error")),
    ("killed", re.compile(r"Killed$|Segmentation fault")),
    ("download", re.compile(r".")),
)
_EVIDENCE_CHARS = 300
_RAW_SCAN_CHARS = 512
_LOSS_NAMES = ("train/loss", "val/loss")


def scan_line(line: str) -> LogFinding | None:
    """The finding a single line shows: CUDA OOM, a traceback, NCCL trouble, a download, ...

    Download activity (`Downloading ...`, a hub progress bar for a `.safetensors` file,
    torchvision's `Downloading: "https://..."`) on a rerun means a cache miss.
    """
    if len(line) > _RAW_SCAN_CHARS:  # a redrawn bar or a huge line: look at what shows
        line = normalise_line(line)
    # Plain substring tests run at C speed and rule out almost every line before any regex.
    if not (
        "emory" in line
        or "Traceback" in line
        or "ownload" in line
        or "Fetching" in line
        or "NCCL" in line
        or "CUDA error" in line
        or "Killed" in line
        or "Segmentation" in line
        or "B/s" in line
    ):
        return None
    line = normalise_line(line)
    if _TRIGGER.search(line) is None:
        return None
    for kind, pattern in _KINDS:
        if pattern.search(line):
            return LogFinding(kind=kind, evidence=line.strip()[:_EVIDENCE_CHARS])
    return None


def findings_from_metric(metric: LogMetric) -> list[LogFinding]:
    """`nan` / `inf` findings for a metric whose loss (any `*loss*` value) is not finite."""
    found: list[LogFinding] = []
    for name, value in metric.values:
        if not math.isfinite(value) and (name in _LOSS_NAMES or "loss" in name):
            kind = "nan" if math.isnan(value) else "inf"
            where = f" at step {metric.step}" if metric.step is not None else ""
            if metric.epoch is not None:
                where += f" in epoch {metric.epoch:g}"
            found.append(LogFinding(kind=kind, evidence=f"{name} = {value}{where}"))
    return found

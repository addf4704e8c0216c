"""Checks of command-line values shared by the commands: numbers, intervals, durations.

Standard library only, so the command line can check everything before it imports a command.
Each check returns the value or raises `ValueError` with the one line to show the person.
"""

from __future__ import annotations

import argparse
import math
import re

MIN_INTERVAL_S = 0.05
"""A full sample (every GPU, the host, its processes) more often than 20 times a second only
burns CPU: at 1e-9 the sampler busy-looped at 100 % of a core."""
MIN_PEAK_INTERVAL_S = 0.005
"""The fast memory sampler reads at most 200 times a second (0 turns it off)."""
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def finite_float(text: str) -> float:
    """An `argparse` type: a finite number (`nan` and `inf` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def check_interval(seconds: float) -> float:
    """`--interval`: at least `MIN_INTERVAL_S`."""
    if not seconds >= MIN_INTERVAL_S:
        raise ValueError(f"--interval must be at least {MIN_INTERVAL_S:g} s (got {seconds:g})")
    return seconds


def check_peak_interval(seconds: float) -> float:
    """`--peak-interval`: 0 (off) or at least `MIN_PEAK_INTERVAL_S`."""
    if seconds != 0 and not seconds >= MIN_PEAK_INTERVAL_S:
        raise ValueError(
            f"--peak-interval must be 0 (off) or at least "
            f"{MIN_PEAK_INTERVAL_S:g} s (got {seconds:g})"
        )
    return seconds


def check_speed(factor: float) -> float:
    """`--speed`: more than zero."""
    if not factor > 0:
        raise ValueError("--speed must be positive")
    return factor


def parse_duration(text: str) -> float:
    """`90`, `90s`, `10m`, `1.5h`, `1h30m` to seconds; raises `ValueError` on anything else."""
    cleaned = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", cleaned):
        seconds = float(cleaned)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", cleaned)
        if not parts or "".join(n + u for n, u in parts) != cleaned:
            raise ValueError(f"--duration {text!r}: expected a time such as 90s, 10m, 2h, 1h30m")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not math.isfinite(seconds):
        raise ValueError(f"--duration {text!r}: too long")
    if seconds <= 0:
        raise ValueError(f"--duration {text!r}: must be more than zero")
    return seconds

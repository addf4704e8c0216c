"""What a parsed metric may hold: finite counters, named values, and where NaN and Inf belong."""

from __future__ import annotations

import math

from parsers.model import LogMetric

MAX_COUNTER = 2**53
"""Largest step or epoch accepted; above it a float (the charts, `metrics.csv`) is not exact."""
MAX_TAKEN_AT = 1e11
"""Latest line time accepted, in Unix seconds (the year 5138): a larger stamp is not a date."""
_INFINITE_OK = ("loss", "grad_norm", "perplexity", "ppl")
"""Parts of the names of values that may be infinite: a diverging run's loss, gradient norm
and perplexity really are, and that is a health finding, not a parse failure."""


def value_error(message: str, cause: BaseException) -> ValueError:
    """A `ValueError` whose `__cause__` is `cause`; raise it where `raise ... from cause` was.

    mypyc-compiled code (hatch_build.py) drops the cause of `raise ... from`, but keeps one
    set by hand.
    """
    error = ValueError(message)
    error.__cause__ = cause
    return error


def to_step(number: float) -> int:
    """A step counter from a parsed number (a fraction is cut off, as `int` does).

    Raises:
        ValueError: the number is NaN, infinite, negative or above `MAX_COUNTER`.
    """
    if not 0.0 <= number <= MAX_COUNTER:  # NaN fails every comparison
        raise ValueError(f"step {number!r} is not a count from 0 to 2**53")
    return int(number)


def to_epoch(number: float) -> float:
    """An epoch from a parsed number.

    Raises:
        ValueError: the number is NaN, infinite, negative or above `MAX_COUNTER`.
    """
    if not 0.0 <= number <= MAX_COUNTER:
        raise ValueError(f"epoch {number!r} is not a count from 0 to 2**53")
    return float(number)


def may_be_infinite(name: str) -> bool:
    """Whether the value `name` may be +-Inf: loss, gradient norm and perplexity values."""
    return any(part in name for part in _INFINITE_OK)


def check_metric(metric: LogMetric) -> LogMetric:
    """The metric as the rest of gpuherd may rely on it, or `ValueError` for the whole line.

    The rules: `step` and `epoch` are finite counts from 0 to `MAX_COUNTER` (else the line is
    unparsed); `taken_at` is a date from 1970 to `MAX_TAKEN_AT` (else it is left out); every
    value has a non-empty name and is a finite float, NaN (how logs print an undefined value,
    such as detectron2's AP for an absent object size), or +-Inf for the names
    `may_be_infinite` allows. A value breaking these rules, and a bad `taken_at`, are left out
    and counted in `unparsed_values`; a line with no value left is unparsed.

    Raises:
        ValueError: a bad step or epoch, or no value left.
    """
    step, epoch, taken_at = metric.step, metric.epoch, metric.taken_at
    if step is not None and not 0 <= step <= MAX_COUNTER:
        raise ValueError(f"step {step!r} is not a count from 0 to 2**53")
    if epoch is not None and not 0.0 <= epoch <= MAX_COUNTER:
        raise ValueError(f"epoch {epoch!r} is not a count from 0 to 2**53")
    if taken_at is not None and not 0.0 <= taken_at <= MAX_TAKEN_AT:
        return _without_bad_values(metric)
    for name, value in metric.values:
        # `value - value` is 0.0 for a finite float and NaN otherwise: one test, no call
        if not name or value - value != 0.0:
            return _without_bad_values(metric)
    return metric


def _without_bad_values(metric: LogMetric) -> LogMetric:
    kept: list[tuple[str, float]] = []
    bad = metric.unparsed_values
    for name, value in metric.values:
        if not name.strip() or (math.isinf(value) and not may_be_infinite(name)):
            bad += 1
        else:
            kept.append((name, value))
    taken_at = metric.taken_at
    if taken_at is not None and not 0.0 <= taken_at <= MAX_TAKEN_AT:
        taken_at, bad = None, bad + 1
    if not kept:
        raise ValueError(f"no usable value: {metric.values[:3]!r}"[:200])
    return LogMetric(tuple(kept), metric.step, metric.epoch, taken_at, bad)

"""What a valid cell of a session CSV holds: one rule per kind of value, shared by every reader.

A cell is read with Python's `float()`, then checked against its rule: a finite number inside
the rule's range (and whole, for counts). An empty cell is "not available" (`None`); text that is
not a number, `nan`, an infinity, or a number outside the range (a negative percentage, a byte
count above 2**53) is a bad cell: also `None`, and counted, so the reader can say how many it
met. No recorder writes `nan` or `inf` into a sample's cell (an unknown value is written empty),
so one there is damage, named like any other. The streaming reader (`--replay`) applies
`CellRule.read` cell by cell; the columnar reader of summaries applies the same `lo`, `hi` and
`whole` to whole columns at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_T_S = 1e11
"""The latest time a session may hold, in Unix seconds (the year 5138): later ones are garbage,
and would overflow date formatting."""
MAX_WHOLE = float(2**53 - 1)
"""The largest count a cell may hold: every whole number up to it is exact as a float."""


@dataclass(frozen=True, slots=True)
class CellRule:
    """The valid values of one kind of numeric cell."""

    lo: float
    hi: float
    whole: bool = False
    """Whether the value must be a whole number (counts, bytes, indices); read as an `int`."""

    def read(self, text: str) -> tuple[float | int | None, bool]:
        """`(value, bad)`: the cell's value or `None`, and whether it was a bad cell."""
        if not text:
            return None, False
        try:
            value = float(text)
        except ValueError:
            return None, True
        if self.lo <= value <= self.hi:  # false for NaN: the common case costs one test
            if not self.whole:
                return value, False
            if value.is_integer():
                return int(value), False
            return None, True
        return None, True  # out of range, NaN or an infinity: all damage

    def why(self, text: str) -> str:
        """Why `text` is a bad cell, in words."""
        try:
            value = float(text)
        except ValueError:
            return f"{_shown(text)} is not a number"
        if not math.isfinite(value):
            return f"{_shown(text)} is not a finite number"
        if self.whole and not value.is_integer():
            return f"{_shown(text)} is not a whole number"
        return f"{_shown(text)} is outside {_fmt(self.lo)} to {_fmt(self.hi)}"


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


TIME = CellRule(0.0, MAX_T_S)
"""Unix seconds."""
GPU_INDEX = CellRule(0, 65535, whole=True)
PID = CellRule(0, 2**32 - 1, whole=True)
BYTES = CellRule(0, MAX_WHOLE, whole=True)
COUNT = BYTES
PERCENT = CellRule(0.0, 100.0)
"""A share of one whole: GPU utilization, host CPU, memory-controller load."""
FAN_PERCENT = CellRule(0.0, 1000.0)
"""NVML: the fan speed "may exceed 100% in certain cases"."""
PROCESS_PERCENT = CellRule(0.0, 1e6)
"""A process's CPU, 100 per busy core."""
CELSIUS = CellRule(-273.15, 1000.0)
WATTS = CellRule(0.0, 1e6)
MHZ = CellRule(0, 1e6, whole=True)
PSTATE = CellRule(0, 32, whole=True)
CPU_COUNT = CellRule(1, 2**20, whole=True)
LOAD = CellRule(0.0, 1e9)
RATE = CellRule(0.0, MAX_WHOLE)
"""Bytes per second."""
LINE = CellRule(1, MAX_WHOLE, whole=True)
STEP = CellRule(0, MAX_WHOLE, whole=True)
EPOCH = CellRule(0.0, 1e9)
VALUE = CellRule(-math.inf, math.inf)
"""A training metric: any number; `nan` and infinities are values too. Read with `read_value`,
not `CellRule.read`."""


def read_value(text: str) -> float:
    """A metric's value: any float, `nan` and infinities included; `ValueError` otherwise."""
    return float(text)


BOOL_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def read_bool(text: str) -> tuple[bool | None, bool]:
    """`(value, bad)` of a `1`/`0` cell; `true`/`false`/`yes`/`no` and `1.0`/`0.0` are read too."""
    if not text:
        return None, False
    word = BOOL_WORDS.get(text.strip().lower())
    if word is not None:
        return word, False
    value, bad = CellRule(0, 1, whole=True).read(text)
    return (None if value is None else bool(value)), bad

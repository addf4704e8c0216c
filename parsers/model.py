"""What parsers produce: the metrics one log line reports, and health findings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, unsafe_hash=True)
class LogMetric:
    """The metrics one log line (or one CSV/JSON row) reports.

    Names are normalised (`train/loss`, `val/acc`, `throughput/it_s`, `eta_s`, ...); keys a parser
    does not know keep their own name. NaN, and Inf of a loss, are values, not failures; the
    rules every parser's output obeys are in `parsers.values.check_metric`.

    Treated as immutable: nothing assigns to a metric after it is made, and the test suite
    checks that on every path its tests run (`tests/conftest.py` makes a second assignment to
    a field raise `FrozenInstanceError`). It is not a frozen dataclass because a frozen one
    sets each field through a call: about 6,000 machine instructions a metric against 2,400
    (callgrind, Python 3.12), and every metric line makes one; that was 3 % of all parsing.
    """

    values: tuple[tuple[str, float], ...]
    """(name, value) pairs in the order the line gives them."""
    step: int | None = None
    epoch: float | None = None
    taken_at: float | None = None
    """Unix seconds, only when the line itself carries a timestamp."""
    unparsed_values: int = 0
    """Values of the line that were left out: a CSV cell that is not a number, an infinite
    learning rate, a stamp that is no date. The line counts as an unparsed line too."""

    def as_dict(self) -> dict[str, float]:
        """The values as a dict (a later duplicate name wins)."""
        return dict(self.values)


@dataclass(frozen=True, slots=True)
class LogFinding:
    """A health finding the log alone supports, such as a CUDA OOM or a traceback."""

    kind: str
    """Short kind: `nan`, `inf`, `oom`, `traceback`, `download`, `stalled`, ..."""
    evidence: str
    """The log line or the metric values that support it."""

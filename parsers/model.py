"""What parsers produce: the metrics one log line reports, and health findings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogMetric:
    """The metrics one log line (or one CSV/JSON row) reports.

    Names are normalised (`train/loss`, `val/acc`, `throughput/it_s`, `eta_s`, ...); keys a parser
    does not know keep their own name. NaN, and Inf of a loss, are values, not failures; the
    rules every parser's output obeys are in `parsers.values.check_metric`.
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


def _set_fields_directly() -> None:
    """Give `LogMetric` an `__init__` that fills its slots without `object.__setattr__`.

    A frozen dataclass's own `__init__` sets each field through `object.__setattr__`, which
    makes a metric cost about 1.3 us; every log line at 100,000 lines a second makes one or
    two. Setting the slot descriptors directly does the same at about half the cost; the
    instance stays frozen (assignment still raises `FrozenInstanceError`), and equality,
    hashing, `repr` and `dataclasses.replace` are the dataclass's own.
    """
    setters = [getattr(LogMetric, name).__set__
               for name in ("values", "step", "epoch", "taken_at", "unparsed_values")]
    set_values, set_step, set_epoch, set_taken_at, set_unparsed = setters

    def __init__(  # the signature of the generated one
        self: LogMetric,
        values: tuple[tuple[str, float], ...],
        step: int | None = None,
        epoch: float | None = None,
        taken_at: float | None = None,
        unparsed_values: int = 0,
    ) -> None:
        set_values(self, values)
        set_step(self, step)
        set_epoch(self, epoch)
        set_taken_at(self, taken_at)
        set_unparsed(self, unparsed_values)

    __init__.__qualname__ = "LogMetric.__init__"
    LogMetric.__init__ = __init__  # type: ignore[method-assign]


_set_fields_directly()


@dataclass(frozen=True, slots=True)
class LogFinding:
    """A health finding the log alone supports, such as a CUDA OOM or a traceback."""

    kind: str
    """Short kind: `nan`, `inf`, `oom`, `traceback`, `download`, `stalled`, ..."""
    evidence: str
    """The log line or the metric values that support it."""

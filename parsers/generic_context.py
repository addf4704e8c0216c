"""The generic format's parser, with the context a log carries across lines (epoch blocks)."""

from __future__ import annotations

import math
import re

from parsers.keyvalue import parse_normalised_line
from parsers.line_parser import LineFunction, LineParser
from parsers.model import LogMetric
from parsers.table_lines import TableLines
from parsers.text import STANDARD_NAMES, normalise_line
from parsers.values import to_epoch
from parsers.vocabulary_short import METRIC_WORDS

CONTEXT_LINES = 12
"""Lines after which an epoch heading or record no longer dates the lines below it."""

# `Epoch 12`, `EPOCH 7`, `===== Epoch 1 =====`, `[run] Epoch 1.0000 dev BLEU4: ...`: the epoch
# a block of lines below belongs to (no `:` before it, so `lr: ... epoch 3` is no heading)
_EPOCH_HEADING = re.compile(r"^[^:]{0,60}?\b(?:[Ee]poch|EPOCH)\s+(\d+(?:\.\d+)?)\b(?!\s*/)")
_EVALUATION_SIDES = ("val/", "test/", "best/")
"""A best-so-far (`best metric, hmean: 0.14`) is scored on the validation side too."""


class GenericParser:
    """`parse_generic_line`, plus what a line means in the lines around it.

    Before the first metric with a step or epoch, a line of settings (a learning rate, an
    epoch count, `eps`, `weight_decay`: no name of a measured quantity) is the configuration
    a run prints before it starts, not a metric (`lr: 0.0006`, `epochs : 10`, an optimizer
    printout's `lr: 0.001`).

    `Epoch 1 - ... loss=4.93` then `Validation - loss=4.09 ppl=59.5`: the validation line
    names no epoch, and belongs to epoch 1. A validation (or test) line without a step or
    epoch (one with a validation value and no training value) takes the epoch of the last
    record or heading that named one, within `CONTEXT_LINES` lines; a training line never
    does (its counters are its own).
    """

    __slots__ = ("_age", "_anchored", "_epoch", "_tables")

    def __init__(self) -> None:
        self._tables = TableLines()
        """The tables printed in the log (`parsers.table_lines`): their lines are theirs."""
        self._epoch: float | None = None
        self._age = CONTEXT_LINES
        self._anchored = False
        """Whether a metric with a step or epoch has been read: the run has begun."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line, dating a validation line by the epoch block it stands in."""
        seen = normalise_line(line)
        claimed, table = self._tables.read(seen)
        if claimed:
            metric = table
        else:
            metric = parse_normalised_line(seen)
            if table is not None:  # a name/value table that this line ends
                metric = table if metric is None else merged(table, metric)
        if self._epoch is not None:
            self._age += 1
        if metric is None:
            if "poch" in line or "POCH" in line:
                self._note_heading(line)
            return None
        epoch = metric.epoch
        if epoch is not None:
            self._epoch, self._age = epoch, 0
        elif metric.step is None:
            return self._in_context(metric)
        if not self._anchored:
            self._anchored = True
        return metric

    def _in_context(self, metric: LogMetric) -> LogMetric | None:
        """A metric without a step or epoch, as the lines before it date or discard it."""
        if not self._anchored and all(
            _is_setting(name) and math.isfinite(value) for name, value in metric.values
        ):
            return None  # `lr: 0.0006`, `epochs : 10`: the settings a run prints first
        if self._epoch is not None and self._age <= CONTEXT_LINES and _evaluation_only(metric):
            return LogMetric(
                metric.values, None, self._epoch, metric.taken_at, metric.unparsed_values
            )
        return metric

    def reset(self) -> None:
        """Forget the epoch block and the tables (the log was truncated or rotated)."""
        self._epoch, self._age, self._anchored = None, CONTEXT_LINES, False
        self._tables.reset()

    def _note_heading(self, line: str) -> None:
        heading = _EPOCH_HEADING.match(normalise_line(line))
        if heading is not None:
            try:
                self._epoch, self._age = to_epoch(float(heading[1])), 0
            except ValueError:
                pass


def merged(first: LogMetric, second: LogMetric) -> LogMetric:
    """One metric of two read on one line: `first`'s values and anchors win, `second` adds."""
    names = {name for name, _ in first.values}
    values = (*first.values, *(pair for pair in second.values if pair[0] not in names))
    return LogMetric(
        values,
        second.step if first.step is None else first.step,
        second.epoch if first.epoch is None else first.epoch,
        first.taken_at if first.taken_at is not None else second.taken_at,
        first.unparsed_values + second.unparsed_values,
    )


class TablesBeside:
    """A console format's parser, with the tables its log prints read beside it.

    YOLOv5 prints its table rows with a tqdm bar after them (`0/299  5.05G  0.06  ...  1280:
    100%|███| 213/213 [06:21<00:00, 1.79s/it]`): the bar is the format's, the row the table's,
    and the line gives both. The lines neither claims go to `plain` (a pure line function).
    """

    __slots__ = ("_parser", "_plain", "_tables")

    def __init__(self, parser: LineParser, plain: LineFunction | None = None) -> None:
        self._parser = parser
        self._plain = plain
        self._tables = TableLines()

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line with the format's parser and the table reader."""
        claimed, table = self._tables.read(normalise_line(line))
        own = self._parser.feed(line)
        if own is None and not claimed and self._plain is not None:
            own = self._plain(line)
        if table is None or own is None:
            return table or own
        return merged(table, own)

    def reset(self) -> None:
        """Reset the format's parser and forget the tables."""
        self._parser.reset()
        self._tables.reset()


def _evaluation_only(metric: LogMetric) -> bool:
    """Whether a metric reports the validation (or test) side and nothing of training."""
    names = [name for name, _ in metric.values]
    return any(name.startswith(_EVALUATION_SIDES) for name in names) and not any(
        name.startswith("train/") for name in names
    )


def _is_setting(name: str) -> bool:
    """A name of a setting rather than a measured value (`lr`, `epochs`, `eps`)."""
    if name == "lr":
        return True
    return name not in STANDARD_NAMES and not any(word in name.lower() for word in METRIC_WORDS)

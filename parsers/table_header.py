"""A table's header line made into columns, and a row read under them."""

from __future__ import annotations

from parsers.model import LogMetric
from parsers.table_names import (
    SUMMARY_LABELS,
    SUMMARY_WORDS,
    anchor_of,
    cell_value,
    column_name,
    is_metric_name,
)
from parsers.text import parse_number
from parsers.values import to_epoch, to_step

MISSING = frozenset({"-", "--", "n/a", "na", "none", "null", ""})
"""Cells that hold no value this row."""
TableRead = tuple[bool, LogMetric | None]
"""(whether the line belongs to a table, the metric a table gives at this line)."""
NOT_TABLE: TableRead = (False, None)
CLAIMED: TableRead = (True, None)
_Column = tuple[str, str]
"""(`value`, `step`, `epoch`, `label` or `skip`; the metric's name)."""


class Header:
    """A table's columns, as its header line names them."""

    __slots__ = ("columns", "kind", "summary", "tag")

    def __init__(
        self, kind: str, columns: list[_Column], summary: bool = False, tag: str = ""
    ) -> None:
        self.kind = kind
        """`space`, `comma` or `box`: how the rows are cut into cells."""
        self.columns = columns
        self.summary = summary
        """A model summary (`Layer | Output Shape | Param #`): its rows hold no metric."""
        self.tag = tag
        """The word before the names (`copypaste`), which each row repeats."""


def make_header(names: list[str], kind: str, tag: str = "", title: str = "") -> Header | None:
    """The header these column names make; None when they name no metric.

    Args:
        names: the column names, in order.
        kind: how the rows are cut (see `Header.kind`).
        tag: the word each row repeats before its cells.
        title: a section named above the header (`Task: bbox`): the names' prefix.
    """
    lows = [name.lower() for name in names]
    if any(low in SUMMARY_WORDS for low in lows):
        return Header(kind, [("skip", "")] * len(names), summary=True)
    if not any(is_metric_name(name) for name in names):
        return None
    anchored = any(anchor_of(low) is not None for low in lows)
    split = "train" if anchored else "val"
    columns: list[_Column] = []
    group = ""
    for index, raw in enumerate(names):
        if "(" in raw:  # YOLO's `Box(P R mAP50 mAP50-95)`: box scores are the plain ones
            group, _, raw = raw.partition("(")
            group = "" if group.lower() in ("box", "b") else group.lower()
        name = raw.rstrip(")")
        anchor = anchor_of(name.lower())
        metric = column_name(f"{title}/{name}" if title else name, split, anchored)
        if anchor is not None:
            columns.append((anchor, ""))
        elif index == 0 and metric is not None and not is_metric_name(name):
            columns.append(("label", ""))  # `Class`, `Model`: the row's name
        elif metric is None:
            columns.append(("skip", ""))
        else:
            if group and "/" in metric:
                head, _, tail = metric.partition("/")
                metric = f"{head}/{group}_{tail}"
            columns.append(("value", metric))
        if raw != name:
            group = ""
    if not any(role == "value" for role, _ in columns):
        return None
    return Header(kind, columns, tag=tag)


def read_row(header: Header, cells: list[str]) -> TableRead:
    """A row under `header`: NOT_TABLE when the cells do not fit its columns."""
    if header.summary:  # a layer's row: as many cells, more where its cells hold blanks
        return CLAIMED if len(cells) >= len(header.columns) else NOT_TABLE
    if len(cells) != len(header.columns):
        return NOT_TABLE
    values: list[tuple[str, float]] = []
    step: int | None = None
    epoch: float | None = None
    summary_row = True
    try:
        for (role, name), cell in zip(header.columns, cells, strict=True):
            if role == "value":
                if cell.lower() not in MISSING:
                    values.append(cell_value(cell, name))
            elif role == "label":
                if is_number(cell):
                    return NOT_TABLE
                summary_row = cell.lower() in SUMMARY_LABELS  # a single class's row: details
            elif role == "epoch":
                epoch = to_epoch(float(cell.split("/", 1)[0]))  # `1/99`: epoch 1 of 99
            elif role == "step":
                step = to_step(float(cell.split("/", 1)[0]))
    except ValueError:
        return NOT_TABLE
    if not values or not summary_row:
        return CLAIMED
    return True, LogMetric(tuple(values), step, epoch)


def is_name(text: str) -> bool:
    """A column name: opens with a letter, no value (`=`), no prose punctuation at its end."""
    return (
        bool(text)
        and text[0].isalpha()
        and len(text) <= 40
        and "=" not in text
        and text[-1] not in ":,.;!?"
        and not is_number(text)
    )


def is_header_cell(cell: str) -> bool:
    """A boxed header's cell: empty, or names (`Test metric`, `DataLoader 0`, `Param #`).

    A cell that pairs a metric or counter with a number (`epoch 1`, `loss 2.31`) is a
    record's field, not a column's name.
    """
    words = cell.split()
    numbers = [word for word in words if is_number(word)]
    if not numbers:
        return len(cell) <= 40 and "=" not in cell
    name = " ".join(word for word in words if word not in numbers)
    return bool(name) and anchor_of(name.lower()) is None and not is_metric_name(name)


def is_number(text: str) -> bool:
    """Whether a cell is a number as logs write it (`parse_number`)."""
    try:
        parse_number(text)
    except ValueError:
        return False
    return True

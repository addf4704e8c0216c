"""Tables printed in logs, read by their structure: a header of column names, then rows of values.

Four shapes, one state per log (`TableLines`):

* columns aligned by blanks (YOLO's `Epoch GPU_mem box_loss ...` then `1/99 3.2G 0.05 ...`, its
  validation `Class Images Instances P R mAP50 mAP50-95` then the `all` row);
* comma-separated names after a tag, then values after the same tag (detectron2's
  `copypaste: AP,AP50,...` then `copypaste: 40.2,61.0,...`), under an optional `Task: bbox`;
* boxed rows (`| AP | AP50 |`, `|:---:|`, `| 40.2 | 61.0 |`; `+---+` rules; Rich's boxes);
* name/value tables (`parsers.table_boxes.NameValueRows`: Stable-Baselines3, Lightning's test
  table), one metric when the table ends.
"""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.table_boxes import BOX_STARTS, NameValueRows, box_cells, is_rule, split_of
from parsers.table_header import (
    CLAIMED,
    NOT_TABLE,
    Header,
    TableRead,
    is_header_cell,
    is_name,
    make_header,
    read_row,
)

TABLE_REACH = 2
"""Lines a header (or a table's last row) stays remembered without a row under it: a row on
the next line or the one after it (past a blank or a bar) belongs to it, later ones do not."""
EPOCH_REACH = 12
"""Lines after a training row that an evaluation table without an epoch column belongs to it."""
_RATE = re.compile(r"(\d+(?:\.\d+)?)(it/s|s/it)")
_DECIMAL = re.compile(r"(?<![\w@.])\d+\.\d+(?![\w.])")
"""A number with decimals standing alone: a value, which no header holds (`mAP@0.5` may)."""


class TableLines:
    """The tables of one log, a line at a time: the header is remembered for the rows under it.

    A header is forgotten `TABLE_REACH` lines after its last row (or itself), when another
    header comes, and on `reset`.
    """

    __slots__ = ("_age", "_epoch", "_epoch_age", "_header", "_previous", "_rows")

    def __init__(self) -> None:
        self._header: Header | None = None
        self._age = 0
        self._rows = NameValueRows()
        self._previous = ""
        self._epoch: float | None = None
        """The epoch of the last row that named one, for the evaluation table after it."""
        self._epoch_age = EPOCH_REACH

    def reset(self) -> None:
        """Forget every table (the log was truncated or rotated)."""
        self._header, self._age = None, 0
        self._rows = NameValueRows()
        self._previous = ""
        self._epoch, self._epoch_age = None, EPOCH_REACH

    def read(self, line: str) -> TableRead:
        """Read one normalised line.

        A line of no table returns `NOT_TABLE` at once, or the metric of a name/value table
        that it ends.
        """
        self._epoch_age += 1
        if "=" in line and self._header is None and not self._rows.rows:
            # `step=5 loss=0.61`: no table is open, and no name of a header holds a `=`
            self._previous = line
            return NOT_TABLE
        stripped = line.strip()
        previous, self._previous = self._previous.strip(), stripped
        if not stripped:
            return self._other() if self._header is not None or self._rows.rows else NOT_TABLE
        if stripped[0] in BOX_STARTS:
            boxed = self._boxed(stripped)
            if boxed is not None:
                return boxed
        header = self._header
        if header is not None and header.kind != "box" and not header.summary:
            row = self._plain_row(header, stripped)
            if row[0]:
                self._age = 0
                return self._dated(row)
        found = None
        if "  " in stripped and stripped[0].isalpha():
            found = _space_header(stripped)
        elif "," in stripped:
            found = _comma_header(stripped, previous)
        if found is not None:
            self._header, self._age = found, 0
            return CLAIMED
        if header is None:
            return (False, self._rows.take()) if self._rows.rows else NOT_TABLE
        if header.summary and header.kind != "box":
            cells = stripped.split("|") if header.kind == "pipe" else stripped.split()
            if read_row(header, cells)[0]:
                self._age = 0
                return CLAIMED
        return self._other()

    def _dated(self, row: TableRead) -> TableRead:
        """A row, with the epoch of the training row above it when it names none.

        YOLO validates after each epoch: its `all` row, under a header without an epoch
        column, belongs to the epoch of the training row above it (within `EPOCH_REACH`).
        """
        metric = row[1]
        if metric is None or metric.step is not None:
            return row
        if metric.epoch is not None:
            self._epoch, self._epoch_age = metric.epoch, 0
        elif self._epoch is not None and self._epoch_age <= EPOCH_REACH:
            return True, LogMetric(metric.values, None, self._epoch)
        return row

    def _other(self) -> TableRead:
        """A line of no table: the header ages, a name/value table ends."""
        if self._header is not None:
            self._age += 1
            if self._age >= TABLE_REACH:
                self._header = None
        return (False, self._rows.take()) if self._rows.rows else NOT_TABLE

    def _boxed(self, stripped: str) -> TableRead | None:
        """A boxed row or rule; None when the line is neither."""
        if is_rule(stripped):
            if self._rows.rows:
                return True, self._rows.take()
            if self._header is None:
                return None
            self._age = 0
            return CLAIMED
        cells = box_cells(stripped)
        if cells is None:
            if stripped[0] == "|":  # Lightning's plain summary: `  | Name | Type | Params`
                return self._open(stripped.split("|"), "pipe")
            return None
        header = self._header
        if header is not None and header.kind == "box":
            row = read_row(header, cells)
            if row[0]:
                self._age = 0
                return self._dated(row)
        if self._rows.add(cells):
            return CLAIMED
        if len(cells) == 2 and all(map(is_header_cell, cells)):
            # `┃ Test metric ┃ DataLoader 0 ┃`: name/value rows follow, of its split
            self._rows.split = split_of(" ".join(cells)) or "train"
            return CLAIMED
        return self._open(cells, "box")

    def _open(self, cells: list[str], kind: str) -> TableRead | None:
        """A header of boxed or pipe-separated names; None when the cells are no header."""
        text = "|".join(cells)
        if _DECIMAL.search(text) is not None:
            return None  # a value: `| epoch 1 | lr 20.00 | loss 7.63`, a record (not kept)
        key = (kind, text)
        found = _HEADERS[key] if key in _HEADERS else _remember(key, _box_names(cells, kind))
        if found is None:
            return None
        self._header, self._age = found, 0
        return CLAIMED

    def _plain_row(self, header: Header, stripped: str) -> TableRead:
        if header.kind == "pipe":
            return read_row(header, [cell.strip() for cell in stripped.split("|")])
        if header.kind == "comma":
            at = stripped.rfind(": ")
            if at < 0 or not stripped[:at].endswith(header.tag):
                return NOT_TABLE
            return read_row(header, [cell.strip() for cell in stripped[at + 2 :].split(",")])
        table, _, progress = stripped.partition(": ")
        row = read_row(header, table.rstrip(":").split())
        rate = _RATE.search(progress) if row[1] is not None and progress else None
        if rate is None or row[1] is None:
            return row
        speed = float(rate[1])
        if rate[2] == "s/it":
            if not speed > 0:
                return row  # `0.00s/it`: too fast to show, no rate
            speed = 1 / speed
        metric = row[1]
        return True, LogMetric(
            (*metric.values, ("throughput/it_s", speed)), metric.step, metric.epoch
        )


_HEADERS: dict[tuple[str, str], Header | None] = {}
"""What a header candidate made, by its kind and text: a log repeats its headers (YOLO prints
its two at each epoch), and most candidates are no header. Bounded; never changes a reading."""
_HEADERS_MAX = 512


def _remember(key: tuple[str, str], found: Header | None) -> Header | None:
    """Keep what a header candidate made, by its kind and text."""
    if len(_HEADERS) >= _HEADERS_MAX:
        _HEADERS.clear()
    _HEADERS[key] = found
    return found


def _space_header(stripped: str) -> Header | None:
    """A header of names aligned by blanks (`Epoch  GPU_mem  box_loss`), a bar after `: `."""
    key = ("space", stripped.partition(": ")[0])
    if key in _HEADERS:
        return _HEADERS[key]
    return _remember(key, _space_names(key[1].split()))


def _space_names(names: list[str]) -> Header | None:
    if len(names) < 3 or not all(is_name(name) for name in names):
        return None
    return make_header(names, "space")


def _box_names(cells: list[str], kind: str) -> Header | None:
    names = [cell.strip() for cell in cells]
    return make_header(names, kind) if all(map(is_header_cell, names)) else None


def _comma_header(stripped: str, previous: str) -> Header | None:
    """`copypaste: AP,AP50,AP75`, under an optional `copypaste: Task: bbox` line."""
    at = stripped.rfind(": ")
    if at < 0 and not stripped[0].isalpha():
        return None
    tail = stripped[at + 2 :]
    if " " in tail or tail.count(",") < 2:  # prose: `a, b and c`
        return None
    names = tail.split(",")
    if not all(is_name(name) for name in names):
        return None
    tag = stripped[:at].rsplit(None, 1)[-1] if at > 0 else ""
    title = ""
    if tag and f"{tag}: " in previous:
        above = previous[previous.rfind(f"{tag}: ") + len(tag) + 2 :].split(": ")
        if len(above) == 2 and is_name(above[1]) and " " not in above[1]:
            title = above[1]
    return make_header(names, "comma", tag, title)

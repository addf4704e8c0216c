"""Peek at W&B records' protobuf fields, so a record of a kind not read is never decoded.

In offline mode wandb writes a summary record after every history row; decoding each with
wandb's `Record` class only to learn it is no history cost more than the row. The protobuf
wire format puts each field as a tag (field number << 3 | wire type) and, for messages and
strings, a length: the record's kind is the number of its `record_type` oneof member, found
in a few bytes. The field numbers are taken from wandb's own message descriptors at start,
never written here. A record this walk cannot follow (a wire type it does not expect, a field
given twice) raises `WireError`, and the caller decodes it with wandb's class as before.

A history row read in place becomes its `LogMetric` here too, as does one decoded by wandb's
class (`row_metric`): both end in `_metric`. The in-place walk converts its values inline, a
copy of `row_metric`'s loop, because that is most of a row's cost in pure Python. This module
is compiled with mypyc in a built wheel (`hatch_build.py`), as `parsers/` is: every W&B point
passes through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final
from zlib import crc32

from collectors.trackers.common import tag_split_name
from collectors.trackers.framing import CHECKED, FULL_CHUNK_CRC, FramingError
from collectors.trackers.wire import (
    INT64_WRAP,
    LEN,
    VARINT,
    WireError,
    fields,
    read_varint,
    tag,
    varint_bytes,
)
from parsers.model import LogMetric
from parsers.text import metric_name

_DECODED_KINDS: Final = frozenset({"run", "exit"})
"""Kinds read from wandb's decoded class (a history row is read in place)."""


@dataclass(frozen=True)
class RecordNumbers:
    """Field numbers of the parts of wandb's messages that are read, from its descriptors."""

    kinds: dict[int, str]
    """`Record`'s `record_type` oneof members: number -> name (`history`, `run`, ...)."""
    num: int
    item: int
    step: int
    step_num: int
    key: int
    nested_key: int
    value_json: int

    @classmethod
    def of(cls, record_class: Any) -> RecordNumbers:
        """The numbers in `record_class`'s descriptor (wandb's `Record`)."""
        record = record_class.DESCRIPTOR
        history = record.fields_by_name["history"].message_type
        item = history.fields_by_name["item"].message_type
        step = history.fields_by_name["step"].message_type
        return cls(
            kinds={
                field.number: field.name for field in record.oneofs_by_name["record_type"].fields
            },
            num=record.fields_by_name["num"].number,
            item=history.fields_by_name["item"].number,
            step=history.fields_by_name["step"].number,
            step_num=step.fields_by_name["num"].number,
            key=item.fields_by_name["key"].number,
            nested_key=item.fields_by_name["nested_key"].number,
            value_json=item.fields_by_name["value_json"].number,
        )


@dataclass(frozen=True)
class RecordTags:
    """The tags of `RecordNumbers` as they stand in the bytes, made once per run.

    One-byte tags are ints, to compare with `raw[i]`.
    """

    kind_numbers: dict[int, str]
    """All of `RecordNumbers.kinds`, for a record of another layout."""
    num: int
    kinds: dict[int, str]
    item: int
    step: int
    step_num: int
    keys: frozenset[int]
    value: bytes

    @classmethod
    def of(cls, numbers: RecordNumbers) -> RecordTags:
        """The tags of `numbers`' fields."""
        return cls(
            kind_numbers=numbers.kinds,
            num=tag(numbers.num, VARINT),
            kinds={
                tag(number, LEN): name
                for number, name in numbers.kinds.items()
                if tag(number, LEN) < 0x80
            },
            item=tag(numbers.item, LEN),
            step=tag(numbers.step, LEN),
            step_num=tag(numbers.step_num, VARINT),
            keys=frozenset({tag(numbers.nested_key, LEN), tag(numbers.key, LEN)}),
            value=varint_bytes(tag(numbers.value_json, LEN)),
        )


_OTHER: Final = 0
_METRIC: Final = 1
_TIMESTAMP: Final = 2
_STEP: Final = 3
_OWN_KEYS: Final = {b"_timestamp": _TIMESTAMP, b"_step": _STEP}
_MAX_HEADERS: Final = 4096


class HistoryReader:
    """Reads a run's records in place, remembering what each item's header was read as.

    An item of a history row is its header (tags and lengths, its key) and its value. A run
    logs a few keys, in values of a few lengths: once an item's header is checked, the next
    items with the same header bytes are known by one lookup.
    """

    def __init__(self, tags: RecordTags) -> None:
        self.tags = tags
        self.names: dict[bytes, str] = {}
        """The metric name of each key seen in the run, filled as keys come."""
        self._headers: dict[bytes, tuple[int, str]] = {}
        """An item's bytes up to its value -> (what the item is, a metric's name or "")."""
        self._head = 4 + len(tags.value) + 1
        """An item's bytes before its value, but its key: tags and lengths."""
        self._row = (tags.item, tags.step, tags.step_num, self._headers, self._head)
        """What `metric` reads a row with, in one attribute (a row is read in microseconds)."""

    def read(
        self,
        records: list[bytes],
        first: int,
        metrics: list[LogMetric],
        unchecked: list[int],
    ) -> int:
        """Read `records` from `first` on in place, up to one that wandb's class must decode.

        A history row's metric goes to `metrics`; a record of a kind not read (a summary,
        console output, telemetry) is passed over, its checksum unchecked: its damage can
        reach no point.

        Args:
            records: whole records of a run's log.
            first: the index of the first record to read.
            metrics: where history rows' metrics go, in the records' order.
            unchecked: the checksums `WandbLogReader.feed` left to check, one a record.

        Returns:
            The index of the first record to decode with wandb's class (a run or exit record,
            a layout this walk does not follow, a string that is not UTF-8); `len(records)`
            when none is left.

        Raises:
            FramingError: a history row whose checksum does not match (the rows before it
                are in `metrics`).
        """
        tags = self.tags
        num_tag, kinds, row_of = tags.num, tags.kinds, self.metric
        for index in range(first, len(records)):
            raw = records[index]
            try:
                # `record_kind`'s layout, inlined: the record's number (a varint: one byte for
                # the first 127 records, two up to 16383, three up to 2 million; none for 0),
                # then its kind and length (one or two bytes), filling the record
                pos = 0
                if raw[0] == num_tag:
                    pos = 2 if raw[1] < 0x80 else 3 if raw[2] < 0x80 else _after_number(raw)
                kind = kinds.get(raw[pos])  # at 0, `num`'s tag: no kind, `record_kind` decides
                length = raw[pos + 1]
                start = pos + 2
                if length >= 0x80:  # two bytes; three or more (16 KiB and up): `record_kind`
                    kind = kind if raw[start] < 0x80 else None
                    length = length - 0x80 + (raw[start] << 7)
                    start += 1
                end = len(raw)
                if kind is None or start + length != end:
                    kind, start, end = record_kind(raw, tags)
                if kind == "history":
                    crc = unchecked[index]  # `framing.record_intact`, inlined
                    if crc != CHECKED and crc32(raw, FULL_CHUNK_CRC) != crc:
                        raise FramingError("W&B chunk checksum does not match")
                    metric = row_of(raw, start, end)
                    if metric is not None:
                        metrics.append(metric)
                elif kind in _DECODED_KINDS:
                    return index
            except (WireError, UnicodeDecodeError, IndexError):
                return index  # wandb's class decides (IndexError: a record cut short)
        return len(records)

    def metric(self, raw: bytes, start: int, end: int) -> LogMetric | None:
        """The metric of the `HistoryRecord` at raw[start:end] (`row_metric`), read in place.

        Reads the layout wandb writes (each item a short key and a short JSON value); any
        other layout raises `WireError`, and the record is decoded in full by wandb's class.

        Raises:
            WireError: a layout this walk does not follow.
            UnicodeDecodeError: a value that is no number and no UTF-8 (protobuf refuses it).
        """
        item_tag, step_tag, step_num_tag, headers, head = self._row
        values: list[tuple[str, float]] = []
        step_values: list[bytes] | None = None  # made when a row has `_step` items
        step: int | None = None
        timestamp: bytes | None = None
        pos = start
        try:
            while pos < end:  # one pass, few operations an item: most of a row's cost
                if raw[pos] == item_tag:
                    # item tag, item length, key tag, key length, key, value tag, value length
                    value_at = pos + head + raw[pos + 3]
                    try:
                        what, name = headers[raw[pos:value_at]]
                    except KeyError:
                        what, name = self._header(raw, pos, value_at)
                    after = value_at + raw[value_at - 1]
                    if what == _METRIC:
                        # as `row_metric` reads a value (`history_value`), inlined: most
                        # of a row's values
                        text = raw[value_at:after]
                        try:
                            values.append((name, float(text)))
                        except ValueError:
                            text.decode()  # protobuf refuses a string that is not UTF-8
                    elif what == _TIMESTAMP:
                        timestamp = raw[value_at:after]
                    elif what == _STEP:
                        if step_values is None:
                            step_values = []
                        step_values.append(raw[value_at:after])
                    pos = after
                elif raw[pos] == step_tag and raw[pos + 1] < 0x80:
                    # `step {}` (0 is not written) or a one-byte number; else `_step` reads it
                    after = pos + 2 + raw[pos + 1]
                    step = (
                        0
                        if after == pos + 2
                        else (
                            raw[pos + 3]
                            if after == pos + 4
                            and raw[pos + 2] == step_num_tag
                            and raw[pos + 3] < 0x80
                            else _step(raw, pos + 2, after, step_num_tag)
                        )
                    )
                    pos = after
                else:
                    raise WireError("history field not read here")
        except IndexError:
            raise WireError("history cut short") from None
        if pos != end:
            raise WireError("field runs past the history")
        return _metric(values, step, step_values or [], timestamp) if values else None

    def _header(self, raw: bytes, pos: int, value_at: int) -> tuple[int, str]:
        """What the item at `pos` is and, for a metric, its name; its layout checked; remembered.

        The item's bytes up to its value (`raw[pos:value_at]`) are remembered: the same bytes
        are the same key, of a value of the same length, in the same layout.
        """
        tags = self.tags
        key_end = pos + 4 + raw[pos + 3]
        if (
            raw[pos + 1] >= 0x80
            or raw[pos + 2] not in tags.keys
            or raw[pos + 3] >= 0x80
            or raw[key_end : value_at - 1] != tags.value
            or value_at + raw[value_at - 1] != pos + 2 + raw[pos + 1]
        ):
            raise WireError("item of another layout")
        key = raw[pos + 4 : key_end]
        key.decode()  # protobuf refuses a key that is not UTF-8: the class decides (once a key)
        known: tuple[int, str]
        if not key:
            known = (_OTHER, "")  # no key: nothing to name the value by
        elif key[0] != 95:  # `_`: W&B's own keys
            names = self.names
            known = (_METRIC, names[key] if key in names else _new_name(key, names))
        else:
            known = (_OWN_KEYS.get(key, _OTHER), "")
        if len(self._headers) < _MAX_HEADERS:
            self._headers[raw[pos:value_at]] = known
        return known


def _after_number(raw: bytes) -> int:
    """Where a record's number of three to nine bytes ends (its tag at 0); 0 if longer."""
    pos = 3
    while raw[pos] >= 0x80:
        pos += 1
        if pos == 10:
            return 0
    return pos + 1


def record_kind(raw: bytes, tags: RecordTags) -> tuple[str | None, int, int]:
    """The record's kind (its oneof member's name, `None` for none) and that member's span."""
    try:
        # wandb's layout: the record's number, then its kind, filling the record
        if raw[0] == tags.num:
            pos = 2 if raw[1] < 0x80 else read_varint(raw, 1)[1]
            kind = tags.kinds.get(raw[pos])
            if kind is not None:
                length = raw[pos + 1]
                begin = pos + 2
                if length >= 0x80:
                    length, begin = read_varint(raw, pos + 1)
                if begin + length == len(raw):
                    return kind, begin, begin + length
    except IndexError:
        raise WireError("record cut short") from None
    return _record_kind_anywhere(raw, tags.kind_numbers)


def _record_kind_anywhere(raw: bytes, kinds: dict[int, str]) -> tuple[str | None, int, int]:
    kind: str | None = None
    span = (0, 0)
    for number, wire, start, end in fields(raw, 0, len(raw)):
        name = kinds.get(number)
        if name is not None:
            if kind is not None or wire != LEN:
                raise WireError("two record kinds")  # protobuf would merge them
            kind, span = name, (start, end)
    return kind, span[0], span[1]


def row_metric(
    items: list[tuple[bytes, bytes]],
    step: int | None,
    step_values: list[bytes],
    timestamp: bytes | None,
    names: dict[bytes, str],
) -> LogMetric | None:
    """A history row's metric; W&B's own `_step` and `_timestamp` give its step and time.

    Args:
        items: the metrics' (key, value_json), W&B's own (`_...`) set apart.
        step: the row's `step.num`, when it has a step.
        step_values: the values of its `_step` items (one, as wandb writes it).
        timestamp: the value of its `_timestamp` item.
        names: the metric name of each key seen, filled as keys come.

    Raises:
        UnicodeDecodeError: a value that is no number and no UTF-8 (protobuf refuses it).
    """
    values: list[tuple[str, float]] = []
    for key, text in items:
        try:
            number = float(text)  # `history_value`, inlined
        except ValueError:
            text.decode()  # protobuf refuses a record whose strings are not UTF-8
            continue
        values.append((names[key] if key in names else _new_name(key, names), number))
    return _metric(values, step, step_values, timestamp) if values else None


def _metric(
    values: list[tuple[str, float]],
    step: int | None,
    step_values: list[bytes],
    timestamp: bytes | None,
) -> LogMetric:
    """The row's metric of `values`; W&B's own `_step` and `_timestamp` give its step, time."""
    if step is None:
        for text in step_values:  # the first number, as when decoded by wandb's class
            found = history_value(text.decode())
            step = None if found is None or not math.isfinite(found) else int(found)
            if step is not None:
                break
    stamp: float | None = None
    if timestamp is not None:
        try:
            stamp = float(timestamp)  # ASCII: as from text
        except ValueError:
            stamp = history_value(timestamp.decode())
    # positional: the keyword call costs more, once per row
    return LogMetric(tuple(values), step, None, stamp)


def _new_name(raw_key: bytes, names: dict[bytes, str]) -> str:
    key = raw_key.decode()
    name = metric_name(key)
    if name == key and "/" in key:
        name = metric_name(tag_split_name(key))
    names[raw_key] = name
    return name


def history_value(text: str) -> float | None:
    """A history item's JSON value as a number; `None` for anything else (media, tables).

    A JSON number, and the `NaN`, `Infinity` and `-Infinity` wandb writes, are Python float
    literals; a string (quoted), an object, a list, true, false and null are not. `float`
    also takes a few texts JSON never holds (`nan`, ` 1`, `1_0`); testing the first character
    before it, to refuse those, cost a tenth of a row read in place.
    """
    try:
        return float(text)
    except ValueError:
        return None


def _step(raw: bytes, start: int, end: int, num_tag: int) -> int:
    if start == end:
        return 0  # `step {}`: the number 0 is not written
    if raw[start] == num_tag:
        step, pos = read_varint(raw, start + 1)
        if pos != end:
            raise WireError("step of another layout")
        return step - INT64_WRAP if step >= 1 << 63 else step
    raise WireError("step of another layout")

"""Peek at W&B records' protobuf fields, so a record of a kind not read is never decoded.

In offline mode wandb writes a summary record after every history row; decoding each with
wandb's `Record` class only to learn it is no history cost more than the row. The protobuf
wire format puts each field as a tag (field number << 3 | wire type) and, for messages and
strings, a length: the record's kind is the number of its `record_type` oneof member, found
in a few bytes. The field numbers are taken from wandb's own message descriptors at start,
never written here. A record this walk cannot follow (a wire type it does not expect, a field
given twice) raises `WireError`, and the caller decodes it with wandb's class as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_FIXED_SIZES = {_I64: 8, _I32: 4}
_INT64_WRAP = 1 << 64


class WireError(ValueError):
    """The bytes are not a message this walk reads (the caller decodes them in full)."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    byte = data[pos]
    if byte < 0x80:  # most tags and lengths: one byte
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field of the message in data[start:end].

    A varint's span is its bytes, a length-delimited field's span is its payload.
    """
    out = []
    pos = start
    try:
        while pos < end:
            tag, pos = read_varint(data, pos)
            number, wire = tag >> 3, tag & 7
            if wire == _LEN:
                length, pos = read_varint(data, pos)
                begin, pos = pos, pos + length
            elif wire == _VARINT:
                begin = pos
                _value, pos = read_varint(data, pos)
            elif wire in _FIXED_SIZES:
                begin, pos = pos, pos + _FIXED_SIZES[wire]
            else:
                raise WireError(f"wire type {wire}")
            out.append((number, wire, begin, pos))
    except IndexError:
        raise WireError("message cut short") from None
    if pos != end:
        raise WireError("field runs past the message")
    return out


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

    @cached_property
    def tags(self) -> _Tags:
        """The tags as they stand in the bytes (one-byte ones as ints, to compare `raw[i]`)."""
        return _Tags(
            num=_tag(self.num, _VARINT),
            kinds={
                _tag(number, _LEN): name
                for number, name in self.kinds.items()
                if _tag(number, _LEN) < 0x80
            },
            item=_tag(self.item, _LEN),
            step=_tag(self.step, _LEN),
            step_num=_tag(self.step_num, _VARINT),
            keys=frozenset({_tag(self.nested_key, _LEN), _tag(self.key, _LEN)}),
            value=_tag_bytes(_tag(self.value_json, _LEN)),
        )


@dataclass(frozen=True)
class _Tags:
    num: int
    kinds: dict[int, str]
    item: int
    step: int
    step_num: int
    keys: frozenset[int]
    value: bytes


def _tag(number: int, wire: int) -> int:
    return number << 3 | wire


def _tag_bytes(tag: int) -> bytes:
    """A tag as written: a varint."""
    out = bytearray()
    while tag >= 0x80:
        out.append(tag & 0x7F | 0x80)
        tag >>= 7
    out.append(tag)
    return bytes(out)


def record_kind(raw: bytes, numbers: RecordNumbers) -> tuple[str | None, int, int]:
    """The record's kind (its oneof member's name, `None` for none) and that member's span."""
    tags = numbers.tags
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
    return _record_kind_anywhere(raw, numbers.kinds)


def _record_kind_anywhere(raw: bytes, kinds: dict[int, str]) -> tuple[str | None, int, int]:
    kind: str | None = None
    span = (0, 0)
    for number, wire, start, end in fields(raw, 0, len(raw)):
        name = kinds.get(number)
        if name is not None:
            if kind is not None or wire != _LEN:
                raise WireError("two record kinds")  # protobuf would merge them
            kind, span = name, (start, end)
    return kind, span[0], span[1]


def history_row(raw: bytes, start: int, end: int, numbers: RecordNumbers) -> HistoryRow:
    """The items of a `HistoryRecord` at raw[start:end], W&B's own (`_...`) set apart.

    Reads the layout wandb writes (each item a short key and a short JSON value); any other
    layout raises `WireError`, and the record is decoded in full by wandb's class.
    """
    tags = numbers.tags
    item_tag, key_tags, value_tag = tags.item, tags.keys, tags.value
    value_skip = len(value_tag) + 1
    row = HistoryRow([], None, [], None)
    items, step_values = row.items, row.step_values
    pos = start
    try:
        while pos < end:  # one pass, few operations an item: this is most of a row's cost
            after = pos + 2 + raw[pos + 1]
            if raw[pos] == item_tag and raw[pos + 1] < 0x80:
                # key tag, key length, key, value tag, value length, value: nothing else
                key_end = pos + 4 + raw[pos + 3]
                value_at = key_end + value_skip
                if (
                    raw[pos + 2] not in key_tags
                    or raw[pos + 3] >= 0x80
                    or raw[key_end : value_at - 1] != value_tag
                    or value_at + raw[value_at - 1] != after
                ):
                    raise WireError("item of another layout")
                if key_end == pos + 4:
                    pass  # no key: nothing to name the value by
                elif raw[pos + 4] != 95:  # `_`: W&B's own keys
                    items.append((raw[pos + 4 : key_end], raw[value_at:after]))
                elif key_end - pos == 14 and raw[pos + 4 : key_end] == b"_timestamp":
                    row.timestamp = raw[value_at:after]
                elif key_end - pos == 9 and raw[pos + 4 : key_end] == b"_step":
                    step_values.append(raw[value_at:after])
            elif raw[pos] == tags.step and raw[pos + 1] < 0x80:
                # `step {}` (0 is not written) or a one-byte number; else `_step` reads it
                row.step = (
                    0
                    if after == pos + 2
                    else (
                        raw[pos + 3]
                        if after == pos + 4
                        and raw[pos + 2] == tags.step_num
                        and raw[pos + 3] < 0x80
                        else _step(raw, pos + 2, after, tags.step_num)
                    )
                )
            else:
                raise WireError("history field not read here")
            pos = after
    except IndexError:
        raise WireError("history cut short") from None
    if pos != end:
        raise WireError("field runs past the history")
    return row


@dataclass
class HistoryRow:
    """A history row's items as bytes: the metrics' (key, value_json), and W&B's own."""

    items: list[tuple[bytes, bytes]]
    step: int | None
    """The row's `step.num`, when it has a step."""
    step_values: list[bytes]
    """The values of its `_step` items (one, as wandb writes it)."""
    timestamp: bytes | None
    """The value of its `_timestamp` item."""


def _step(raw: bytes, start: int, end: int, num_tag: int) -> int:
    if start == end:
        return 0  # `step {}`: the number 0 is not written
    if raw[start] == num_tag:
        step, pos = read_varint(raw, start + 1)
        if pos != end:
            raise WireError("step of another layout")
        return step - _INT64_WRAP if step >= 1 << 63 else step
    raise WireError("step of another layout")

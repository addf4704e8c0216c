"""The protobuf wire format, as far as the trackers' in-place readers walk it.

Each field is a tag (field number << 3 | wire type), then a varint, 8 or 4 fixed bytes, or a
length and that many bytes (a message, a string). A walk that meets what it does not follow
raises `WireError`, and its caller decodes the message with the tracker's own protobuf class.
"""

from __future__ import annotations

from typing import Final

VARINT: Final = 0
I64: Final = 1
LEN: Final = 2
I32: Final = 5
"""The wire types read."""
FIXED_SIZES: Final = {I64: 8, I32: 4}
INT64_WRAP: Final = 1 << 64
"""An int64 is written as a 64-bit two's complement varint: a value above 2**63 - 1 is this
much below zero."""


def tag(number: int, wire: int) -> int:
    """A field's tag: its number and wire type."""
    return number << 3 | wire


class WireError(ValueError):
    """The bytes are not a message this walk reads (the caller decodes them in full)."""


def varint_bytes(number: int) -> bytes:
    """A non-negative number as a varint is written (a tag, a length, wandb's record number)."""
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    byte = data[pos]
    if byte < 0x80:  # most tags and lengths: one byte
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        if shift == 63 and byte > 1:  # protobuf keeps 64 bits: the class decides such a record
            raise WireError("varint beyond 64 bits")
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
            if wire == LEN:
                length, pos = read_varint(data, pos)
                begin, pos = pos, pos + length
            elif wire == VARINT:
                begin = pos
                _value, pos = read_varint(data, pos)
            elif wire in FIXED_SIZES:
                begin, pos = pos, pos + FIXED_SIZES[wire]
            else:
                raise WireError(f"wire type {wire}")
            out.append((number, wire, begin, pos))
    except IndexError:
        raise WireError("message cut short") from None
    if pos != end:
        raise WireError("field runs past the message")
    return out

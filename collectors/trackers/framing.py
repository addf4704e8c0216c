"""Cut the record logs trackers write into records; a record still being written waits.

TensorBoard's event files are TFRecord files: each record is a little-endian u64 length, the
masked CRC-32C of those 8 bytes, the data and the masked CRC-32C of the data. W&B's
`run-<id>.wandb` is a LevelDB-style log: a 7-byte file header (`:W&B`, magic, version), then
32 KiB blocks of chunks (CRC-32 of type and data, u16 length, u8 type), a record being one
FULL chunk or FIRST, MIDDLE..., LAST. Both writers append and flush every few seconds, so the
end of a file is often a record cut short: it is no error, it is read when it is whole.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

_TF_HEADER: Final = struct.Struct("<QI")
_MASK_DELTA: Final = 0xA282EAD8
MAX_RECORD_BYTES: Final = 64 << 20
"""A length above this is a damaged header, not a record (scalar events are tens of bytes)."""


class FramingError(ValueError):
    """The bytes are not a record log of this kind (bad header, checksum or length)."""


def masked_crc(crc: int) -> int:
    """TFRecord's masking of a CRC-32C (so a CRC of CRCs does not look like data)."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


_LENGTH_CRCS: Final[dict[bytes, int]] = {}
"""Masked CRC of each length header seen: scalar events come in a few lengths, and the pure
Python CRC-32C costs more than decoding the event it frames."""


def _length_crc(header: bytes, crc32c: Callable[[bytes], int]) -> int:
    found = _LENGTH_CRCS.get(header)
    if found is None:
        found = masked_crc(crc32c(header))
        if len(_LENGTH_CRCS) < 65536:
            _LENGTH_CRCS[header] = found
    return found


def split_tfrecords(
    data: bytes, crc32c: Callable[[bytes], int] | None, check_data: bool = True
) -> tuple[list[bytes], int]:
    """The whole records at the start of `data` and how many bytes they take.

    Records before a damaged one are returned; the damage is raised when it comes first.

    Args:
        data: bytes from a record boundary on.
        crc32c: the CRC-32C function; `None` checks no checksum.
        check_data: also check each record's data checksum (the length's is always checked).

    Raises:
        FramingError: a checksum that does not match, or an impossible length.
    """
    records: list[bytes] = []
    offset, size = 0, len(data)
    while size - offset >= 12:
        length, length_crc = _TF_HEADER.unpack_from(data, offset)
        problem = None
        if crc32c is not None and _length_crc(data[offset : offset + 8], crc32c) != length_crc:
            problem = "record length checksum does not match"
        elif length > MAX_RECORD_BYTES:
            problem = f"record of {length} bytes"
        if problem is not None:
            if records:
                break  # hand over the whole records first
            raise FramingError(f"{problem} at byte {offset}")
        end = offset + 12 + length + 4
        if end > size:
            break  # still being written
        body = data[offset + 12 : end - 4]
        if check_data and crc32c is not None:
            (body_crc,) = struct.unpack_from("<I", data, end - 4)
            if masked_crc(crc32c(body)) != body_crc:
                if records:
                    break
                raise FramingError(f"record data checksum does not match at byte {offset}")
        records.append(body)
        offset = end
    return records, offset


WANDB_HEADER: Final = struct.Struct("<4sHB")
WANDB_IDENT: Final = b":W&B"
WANDB_MAGIC: Final = 0xBEE1
WANDB_BLOCK: Final = 32 * 1024
_CHUNK: Final = struct.Struct("<IHB")
_CHUNK_SIZE: Final = 7
_FULL: Final = 1
_FIRST: Final = 2
_LAST: Final = 4
_TYPE_CRC: Final = [zlib.crc32(bytes([kind])) for kind in range(5)]
FULL_CHUNK_CRC: Final = _TYPE_CRC[_FULL]
"""The CRC-32 a one-chunk record's checksum starts from (that of its chunk type)."""
CHECKED: Final = -1
"""An `unchecked` entry of a record whose checksum `feed` compared itself."""


def record_intact(record: bytes, crc: int) -> bool:
    """Whether a record `feed` left unchecked matches its chunk's checksum `crc`."""
    return crc == CHECKED or zlib.crc32(record, FULL_CHUNK_CRC) == crc


@dataclass
class WandbLogReader:
    """Records of a `.wandb` file, fed its bytes in order from its start.

    Keeps the file offset of the next chunk and the chunks of a record not finished yet;
    `feed` takes the bytes from `offset` on and returns the whole records they complete.
    """

    offset: int = 0
    """File offset of the next byte to read."""
    _pending: list[bytes] = field(default_factory=list)

    def feed(self, data: bytes, unchecked: list[int] | None = None) -> tuple[list[bytes], int]:
        """The records completed by `data` (bytes from `offset` on) and the bytes used.

        Records before a damaged chunk are returned; the damage is raised when it comes first.

        Args:
            data: the file's bytes from `offset` on.
            unchecked: an empty list, where the caller takes over the checksums of one-chunk
                records: each record returned gets an entry, the checksum its chunk header gives
                (`record_intact` compares it), or `CHECKED` for a record of several chunks,
                checked here. A reader that passes over most records (wandb writes a
                summary after every history row) then checks only those it reads.

        Raises:
            FramingError: not a W&B log, or a chunk whose checksum does not match.
        """
        used = 0
        if self.offset == 0:
            if len(data) < WANDB_HEADER.size:
                return [], 0
            ident, magic, _version = WANDB_HEADER.unpack_from(data)
            if ident != WANDB_IDENT or magic != WANDB_MAGIC:
                raise FramingError("not a W&B run log (no :W&B header)")
            used = WANDB_HEADER.size
        records: list[bytes] = []
        size, unpack, crc32, type_crcs = len(data), _CHUNK.unpack_from, zlib.crc32, _TYPE_CRC
        base = self.offset
        block_end = used + WANDB_BLOCK - (base + used) % WANDB_BLOCK  # in `data`
        while True:
            if block_end - used < _CHUNK_SIZE:  # the block's tail is padding
                if size < block_end:
                    break
                used = block_end
                block_end += WANDB_BLOCK
                continue
            try:
                crc, length, kind = unpack(data, used)
            except struct.error:
                break  # a chunk header still being written
            start = used + _CHUNK_SIZE
            end = start + length
            if end > size:
                break
            if kind == _FULL and unchecked is not None and not self._pending:
                # most chunks: the loop's end, written out here (through it, 10 % slower)
                records.append(data[start:end])
                unchecked.append(crc)
                used = end
                if end > block_end:
                    block_end = used + WANDB_BLOCK - (base + used) % WANDB_BLOCK
                continue
            body = data[start:end]
            if kind > _LAST or crc32(body, type_crcs[kind]) != crc:
                if records or crc == length == kind == 0:
                    break  # (zeros: past the end of what was written, not a chunk yet)
                raise FramingError(f"W&B chunk checksum does not match at byte {base + used}")
            used = end
            if end > block_end:  # a chunk past its block's end: blocks count on from here
                block_end = used + WANDB_BLOCK - (base + used) % WANDB_BLOCK
            if kind == _FULL and not self._pending:  # most records: one chunk
                records.append(body)
            else:
                self._take(kind, body, records)
            if unchecked is not None:  # records of several chunks, checked above
                unchecked.extend([CHECKED] * (len(records) - len(unchecked)))
        self.offset += used
        return records, used

    def _take(self, kind: int, body: bytes, records: list[bytes]) -> None:
        if kind == _FULL:
            self._pending = []
            records.append(body)
        elif kind == _FIRST:
            self._pending = [body]
        elif self._pending:
            self._pending.append(body)
            if kind == _LAST:
                records.append(b"".join(self._pending))
                self._pending = []

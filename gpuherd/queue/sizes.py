"""Memory sizes as people write them (`20GiB`, `512M`, `1.5TiB`); shown by `gpuherd.format`."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gpuherd.format import GIB, KIB, MIB, format_size

_BINARY = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": GIB * KIB, "p": GIB * MIB}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+) ?([kmgtp]?)(i?)(b?)", re.IGNORECASE)
MAX_BYTES = 1 << 60
"""Larger than any GPU will be for a long time; keeps every size a 64-bit SQLite integer."""
EXAMPLES = "20GiB, 512MiB, 1.5TiB, 20G (= GiB) or a number of bytes"


def parse_size(text: str) -> int:
    """Bytes of a size: `20GiB`, `20G`, `512MiB`, `1.5TiB`, `20GB`, `20000000000`.

    `K`, `M`, `G`, `T`, `P` alone and with `iB` are binary (powers of 1024, as `nvidia-smi`
    and PyTorch count GPU memory); with a plain `B` (`GB`) they are decimal. Case does not
    matter and a space may stand before the unit. Fractions round to the nearest byte.

    Raises:
        ValueError: one line saying what is wrong (`'20XB' is not a size: ...`).
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size: expected e.g. {EXAMPLES}")
    number, prefix, binary, byte = match.groups()
    prefix = prefix.lower()
    if binary and not prefix:  # `20iB`
        raise ValueError(f"{text!r} is not a size: expected e.g. {EXAMPLES}")
    if prefix and byte and not binary:
        unit = _DECIMAL[prefix]
    else:
        unit = _BINARY[prefix]
    try:
        value = int((Decimal(number) * unit).to_integral_value())
    except InvalidOperation:  # pragma: no cover - the regex admits only plain decimals
        raise ValueError(f"{text!r} is not a size: expected e.g. {EXAMPLES}") from None
    if value > MAX_BYTES:
        raise ValueError(f"{text!r} is too large (at most {format_size(MAX_BYTES)})")
    return value

"""Byte sizes as people write them ("20GiB", "512MiB") and as gpuherd shows them."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20, "MB": 10**6,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 10**9, "GIB": 1 << 30, "T": 1 << 40,
          "TB": 10**12, "TIB": 1 << 40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes in `text` ("20GiB", "20G", "1.5TiB", "20000000000"); ValueError otherwise."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (give a number with B, KiB, MiB, GiB or TiB)")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(n_bytes: int) -> str:
    """`n_bytes` in binary units with one decimal: "12.1 GiB"."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"

"""The one place values become text: byte units, rounding, and `None` as `N/A` (or `-`)."""

from __future__ import annotations

import math
import time
import unicodedata
from typing import Any

NA = "N/A"
"""Shown for every value that is not available (`None`, or not a finite number)."""

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
"""Binary byte units, defined here only; `int`, so `2 * GIB` stays a whole number of bytes."""
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def pct_of(part: float | None, whole: float | None) -> float | None:
    """`part` as a percentage of `whole`, or `None` when either is unknown or `whole` is 0."""
    p, w = _finite(part), _finite(whole)
    if p is None or not w:
        return None
    return 100.0 * p / w


def fmt_bytes(n: float | None) -> str:
    """Bytes in the largest binary unit that keeps the number below 1024: `615 MiB`, `1.5 GiB`."""
    value = _finite(n)
    if value is None:
        return NA
    sign = "-" if value < 0 else ""
    value = abs(value)
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{value:.0f} B"
    text = f"{value:.0f}" if value >= 100 else f"{value:.1f}"
    return f"{sign}{text} {_UNITS[unit]}"


def fmt_bytes_gib(n: float | None, digits: int = 1) -> str:
    """Bytes as GiB with a fixed number of decimals: `12.3 GiB`."""
    value = _finite(n)
    return NA if value is None else f"{value / GIB:.{digits}f} GiB"


def fmt_gib_pair(used: float | None, total: float | None, digits: int = 1) -> str:
    """Used over total in GiB, one unit: `12.3 / 139.8 GiB`; an unknown side shows `N/A`."""
    u, t = _finite(used), _finite(total)
    if u is None and t is None:
        return NA
    left = NA if u is None else f"{u / GIB:.{digits}f}"
    right = NA if t is None else f"{t / GIB:.{digits}f}"
    return f"{left} / {right} GiB"


def fmt_pct(value: float | None, digits: int = 0) -> str:
    """A percentage: `97%`."""
    value = _finite(value)
    return NA if value is None else f"{value:.{digits}f}%"


def fmt_temp(celsius: float | None) -> str:
    """A temperature: `64°C`."""
    value = _finite(celsius)
    return NA if value is None else f"{value:.0f}°C"


def fmt_power(watts: float | None) -> str:
    """A power draw: `512 W`."""
    value = _finite(watts)
    return NA if value is None else f"{value:.0f} W"


def fmt_power_pair(draw_w: float | None, limit_w: float | None) -> str:
    """Draw over limit: `512 / 700 W`; an unknown side shows `N/A`."""
    d, lim = _finite(draw_w), _finite(limit_w)
    if d is None and lim is None:
        return NA
    left = NA if d is None else f"{d:.0f}"
    right = NA if lim is None else f"{lim:.0f}"
    return f"{left} / {right} W"


def fmt_mhz(mhz: float | None) -> str:
    """A clock: `1980 MHz`."""
    value = _finite(mhz)
    return NA if value is None else f"{value:.0f} MHz"


def fmt_pstate(pstate: int | None) -> str:
    """A performance state: `P0`."""
    return NA if pstate is None else f"P{pstate}"


def fmt_on_off(flag: bool | None) -> str:
    """A switch such as MIG mode: `on` or `off`."""
    if flag is None:
        return NA
    return "on" if flag else "off"


def fmt_count(n: int | None) -> str:
    """A count with thousands separators: `1,234`."""
    return NA if n is None else f"{n:,}"


def fmt_number(value: float | None, digits: int = 2) -> str:
    """A plain number with fixed decimals, such as a load average: `1.25`."""
    value = _finite(value)
    return NA if value is None else f"{value:.{digits}f}"


def fmt_duration(seconds: float | None) -> str:
    """A duration like `ps` elapsed time: `0:42`, `1:02:05`, `3d 04:05`."""
    value = _finite(seconds)
    if value is None or value < 0:
        return NA
    total = int(value)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}:{minutes:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def fmt_elapsed(started_at: float | None, now: float) -> str:
    """Time since a Unix timestamp, as `fmt_duration`."""
    start = _finite(started_at)
    return NA if start is None else fmt_duration(now - start)


def fmt_rate(bytes_per_s: float | None) -> str:
    """A byte rate: `12.5 MiB/s`."""
    return NA if _finite(bytes_per_s) is None else f"{fmt_bytes(bytes_per_s)}/s"


def fmt_timestamp(unix_s: float | None) -> str:
    """A Unix timestamp in local time: `2025-10-25 14:03:07`."""
    value = _finite(unix_s)
    if value is None:
        return NA
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    except (OverflowError, OSError, ValueError):
        # Beyond the platform's time_t: only a corrupt reading gets here.
        return NA


def fmt_text(text: str | None) -> str:
    """A string (with `visible`'s escapes), or `N/A` when unknown or empty."""
    return visible(text) if text else NA


_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Controls (C0, DEL, C1: ESC and CSI among them), format characters (the bidi overrides and
isolates that reorder a line, zero-width spaces), lone surrogates (an undecodable byte of a
file name) and the line and paragraph separators."""
_JOINERS = frozenset({"\u200c", "\u200d"})
"""Zero-width (non-)joiners: format characters that shape letters and emoji, moving nothing."""


def visible(text: str) -> str:
    r"""`text` with every character that could steer a terminal or reorder a line made visible.

    Every string that others wrote (a file name, a log line, a Prometheus label, a process's
    command line, a container, user or task name, a server's error text) goes through this
    before it reaches a terminal: ESC `[2J` in a log's name would otherwise clear the screen,
    and U+202E would show a line backwards. Such a character becomes its Python escape
    (`\x1b`, `\x9b`, `\u202e`); ordinary Unicode (accents, CJK, emoji) is kept.
    """
    if text.isprintable():  # the common case, at C speed; every hidden character fails it
        return text
    return "".join(_escaped(char) if _hidden(char) else char for char in text)


def visible_lines(text: str) -> str:
    """`visible` line by line, for a text whose lines are its own (a file's, a diff's)."""
    return "\n".join(visible(line) for line in text.split("\n"))


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN_CATEGORIES and char not in _JOINERS


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def fmt_metric(value: float | None) -> str:
    """A training metric in four significant digits; NaN and Inf spelled out, `None` empty."""
    if value is None:
        return ""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.4g}"


def fmt_uptime(seconds: float | None) -> str:
    """An uptime only as fine as its size needs: `42s`, `12m`, `5h 07m`, `3d 04h`.

    Seconds are shown only in the first minute: a cell that changed every second would redraw
    its whole panel every second.
    """
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return NA
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    if total < 86400:
        return f"{total // 3600}h {total % 3600 // 60:02d}m"
    return f"{total // 86400}d {total % 86400 // 3600:02d}h"


def format_size(n_bytes: int) -> str:
    """Bytes in the largest binary unit below 1024, one decimal at most: `12.1 GiB`, `20 GiB`."""
    sign = "-" if n_bytes < 0 else ""
    value = float(abs(n_bytes))
    unit = 0
    while unit < len(_UNITS) - 1 and round(value, 1) >= 1024:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{int(value)} B"
    text = f"{value:.1f}".removesuffix(".0")
    return f"{sign}{text} {_UNITS[unit]}"


def fmt_gib_or_mib(n_bytes: int) -> str:
    """`12.1 GiB`, `512 MiB`; a whole number of units shows no decimals (`20 GiB`)."""
    unit, name = (GIB, "GiB") if abs(n_bytes) >= GIB else (MIB, "MiB")
    if n_bytes % unit == 0:
        return f"{n_bytes // unit} {name}"
    return f"{n_bytes / unit:.1f} {name}"


# Reports (`summary.md`, the note, the lines printed after recording) show `-` for no value.


def fmt_num(value: Any, digits: int = 4) -> str:
    """A metric value for people: `digits` significant digits, `nan`/`inf` as such, `-` for none."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.{digits}g}" if isinstance(value, float) else f"{value:,}"


def fmt_size(value: Any) -> str:
    """Bytes as GiB with one decimal, and below 1 GiB in the unit that fits (`700 KiB`)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return f"{value / GIB:.1f} GiB" if abs(value) >= GIB else fmt_bytes(value)


def fmt_whole_pct(value: Any) -> str:
    """A percentage without decimals, `-` for none."""
    return "-" if not isinstance(value, (int, float)) else f"{value:.0f}%"


def fmt_span(seconds: Any) -> str:
    """`1h 02m 03s`, `4m 05s`, `12.3s`; `-` for none or a negative span."""
    if not isinstance(seconds, (int, float)) or not seconds >= 0:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def fmt_local_time(t: Any) -> str:
    """Unix seconds as local date, time and zone; `-` for none."""
    if not isinstance(t, (int, float)):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t))

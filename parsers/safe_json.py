"""JSON decoding that fails only with ValueError: nesting depth bounded before decoding."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from parsers.values import value_error

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted. Metric records are one to three levels deep;
`json.loads` recurses once per level and raises RecursionError near 1,000 (and less when
called from deep in a stack), and flattening nested records recurses as well."""
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
"""Strings (whose brackets do not nest) and brackets. An unterminated string runs to the end,
so no match ever fails and backtracks: the walk stays linear."""
_scan_once: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__, untyped
"""(value, end) of the JSON value at an index; `NaN` and `Infinity` accepted as `json.loads`
accepts them."""


def loads(text: str) -> object:
    """Decode JSON text as `json.loads` does (Python's `NaN` and `Infinity` tokens included).

    Raises:
        ValueError: the text is not JSON, nests deeper than `MAX_DEPTH`, or holds an
            integer of more than 4,300 digits (Python's conversion limit).
    """
    # Counting openers runs at C speed; only text with many of them is walked token by token.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        check_depth(text)
    # The decoder's C scanner, called directly, skips `json.loads`'s Python layers (type
    # checks, two whitespace regexes): a third of the cost of a metric record. A document
    # it does not take whole (whitespace around it, or any error) goes through `json.loads`,
    # which gives the same value or raises its own error.
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError):
        end = -1
    if end == len(text):
        return value
    try:
        return json.loads(text)  # json.JSONDecodeError is a ValueError
    except RecursionError as error:  # cannot happen after check_depth; kept as a last fence
        raise value_error("JSON nested too deeply", error)  # noqa: B904


def check_depth(text: str) -> None:
    """Raise `ValueError` if the arrays and objects in `text` nest deeper than `MAX_DEPTH`."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match[0]
        if token == "[" or token == "{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
        elif token == "]" or token == "}":
            depth -= 1

"""What a Prometheus query answer must look like, checked whole before any of it is used.

The server is not trusted to be Prometheus: a proxy, a wrong URL or a hostile host may answer
anything. Every shape an instant-vector answer can take wrongly is one `PrometheusError` that
names where the answer went wrong, so the fleet view shows one line and keeps its last rows;
nothing but a list of well-formed `Series` leaves this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from collectors.base import GpuherdError
from gpuherd.present.format import visible

MAX_SAID_CHARS = 300
"""The most of a server's own error text shown (it is the server's to choose, so it is cut)."""


class PrometheusError(GpuherdError):
    """Prometheus cannot be asked, or answered with an error or a malformed answer."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="fleet")


@dataclass(frozen=True, slots=True)
class Series:
    """One element of an instant vector."""

    labels: dict[str, str]
    value: float
    """The sample's value; NaN and the infinities as Prometheus spells them are kept."""
    at: float
    """The evaluation time Prometheus gave the answer (Unix seconds)."""


def said(text: object) -> str:
    """A server's own words, safe to show: control characters made visible, length capped."""
    shown = visible(text) if isinstance(text, str) else f"({_kind(text)})"
    return shown if len(shown) <= MAX_SAID_CHARS else shown[: MAX_SAID_CHARS - 1] + "…"


def read_answer(raw: bytes, url: str) -> list[Series]:
    """The series of one answer of `/api/v1/query`.

    Raises:
        PrometheusError: the answer is not JSON, is an error, or is not an instant vector of
            well-formed elements; the message says which.
    """
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise PrometheusError(
            f"{url} answered JSON nested too deeply to be Prometheus's query API"
        ) from None
    except ValueError:  # not JSON, or not UTF-8
        doc = None
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        raise PrometheusError(
            f"{url} does not answer like Prometheus's query API "
            "(/api/v1/query); is it the Prometheus server's URL?"
        )
    if doc["status"] == "error":
        raise PrometheusError(f"Prometheus at {url}: {said(doc.get('error', 'error'))}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise _malformed(url, "data", data, "an object")
    if data.get("resultType") != "vector":
        if isinstance(data.get("resultType"), str):
            raise PrometheusError(
                f"Prometheus at {url} answered a {said(data['resultType'])}, not an instant vector"
            )
        raise _malformed(url, "data.resultType", data.get("resultType"), '"vector"')
    result = data.get("result")
    if not isinstance(result, list):
        raise _malformed(url, "data.result", result, "a list")
    return [_series(element, f"data.result[{i}]", url) for i, element in enumerate(result)]


def _series(element: Any, where: str, url: str) -> Series:
    if not isinstance(element, dict):
        raise _malformed(url, where, element, "an object")
    metric = element.get("metric")
    if not isinstance(metric, dict):
        raise _malformed(url, f"{where}.metric", metric, "an object of labels")
    for name, value in metric.items():
        if not isinstance(value, str):
            raise _malformed(url, f"{where}.metric[{said(name)}]", value, "a string")
    pair = element.get("value")
    if not isinstance(pair, list) or len(pair) != 2:
        raise _malformed(url, f"{where}.value", pair, 'a [time, "value"] pair')
    at, text = pair
    if not _is_time(at):
        raise _malformed(url, f"{where}.value[0]", at, "a time in Unix seconds")
    value = _number(text)
    if value is None:
        raise _malformed(url, f"{where}.value[1]", text, 'a number in a string ("1.5", "NaN")')
    return Series(dict(metric), value, float(at))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    """A finite number of seconds; an integer too large for a float is none."""
    if not _is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # JSON integers are unbounded; floats are not
        return False


def _number(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(text)  # "NaN", "+Inf" included
    except ValueError:
        return None


def _malformed(url: str, where: str, found: Any, wanted: str) -> PrometheusError:
    return PrometheusError(
        f"Prometheus at {url} gave a malformed answer: {where} is {_kind(found)}, not {wanted}"
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null (or missing)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return f"the string {said(json.dumps(value[:40]))}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "an object"

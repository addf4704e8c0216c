"""A small client of Prometheus's HTTP query API (`/api/v1/query`), standard library only.

Connections go straight to the URL given: proxy settings in the environment are not used, so a
fleet view aimed at a Prometheus on this machine never sends a query anywhere else.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from collectors.base import GpuherdError

DEFAULT_TIMEOUT_S = 5.0


class PrometheusError(GpuherdError):
    """Prometheus cannot be asked, or answered with an error."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="fleet")


@dataclass(frozen=True, slots=True)
class Series:
    """One element of an instant vector."""

    labels: dict[str, str]
    value: float
    at: float
    """The evaluation time Prometheus gave the answer (Unix seconds)."""


def check_url(text: str) -> str:
    """The base URL of a Prometheus server (`http://host:9090`, maybe with a path prefix).

    Raises:
        ValueError: with the one line to show.
    """
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--prometheus {text!r}: expected a URL such as http://127.0.0.1:9090")
    if parsed.query or parsed.fragment:
        raise ValueError(f"--prometheus {text!r}: give the server's base URL, without ?query")
    try:
        parsed.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise ValueError(f"--prometheus {text!r}: the port is not a number from 0 to 65535") \
            from None
    return text.rstrip("/")


class PrometheusClient:
    """Instant queries against one Prometheus server."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = check_url(url)
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def query(self, expr: str) -> list[Series]:
        """Evaluate `expr` now; its vector. Raises `PrometheusError` with the reason."""
        body = urllib.parse.urlencode({"query": expr}).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/query", data=body, method="POST",
                                         headers={"Accept": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            raise PrometheusError(self._http_problem(error)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                reason = f"no answer within {self.timeout_s:g} s"
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        return _vector(self._decode(raw))

    def _decode(self, raw: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
            raise PrometheusError(f"{self.url} does not answer like Prometheus's query API "
                                  "(/api/v1/query); is it the Prometheus server's URL?")
        if doc["status"] == "error":
            raise PrometheusError(f"Prometheus at {self.url}: {doc.get('error', 'error')}")
        return doc

    def _http_problem(self, error: urllib.error.HTTPError) -> str:
        try:
            doc = json.loads(error.read())
        except (ValueError, OSError):
            doc = None
        if isinstance(doc, dict) and doc.get("error"):
            return f"Prometheus at {self.url}: {doc['error']}"
        return (f"{self.url} answered HTTP {error.code} to a query: is it the Prometheus "
                "server's URL?")


def _vector(doc: dict[str, Any]) -> list[Series]:
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusError("Prometheus answered something other than an instant vector")
    out = []
    for element in data.get("result") or ():
        try:
            at, text = element["value"]
            value = float(text)  # "NaN", "+Inf" included
            labels = {str(k): str(v) for k, v in element["metric"].items()}
        except (KeyError, TypeError, ValueError):
            continue  # one odd element does not spoil the others
        out.append(Series(labels, value, float(at)))
    return out


def finite(value: float | None) -> float | None:
    """`value` when it is a finite number, else `None`."""
    return value if value is not None and math.isfinite(value) else None

"""A small client of Prometheus's HTTP query API (`/api/v1/query`), standard library only.

Connections go straight to the URL given: proxy settings in the environment are not used, so a
fleet view aimed at a Prometheus on this machine never sends a query anywhere else. The server
is not trusted to behave: one answer gets `timeout_s` in all (connecting, the headers and the
whole body, however slowly it drips) and at most `max_bytes`, and is checked whole
(`gpuherd.fleet.answer`) before any of it is used.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse

from gpuherd.common.deadline import Deadline
from gpuherd.fleet.answer import PrometheusError, Series, read_answer, said
from gpuherd.present.format import fmt_bytes

__all__ = ["PrometheusClient", "PrometheusError", "Series", "check_url"]

DEFAULT_TIMEOUT_S = 5.0
"""The whole of one answer, from connecting to its last byte."""
MAX_ANSWER_BYTES = 32 << 20
"""The largest answer read: a fleet of 1,000 GPUs answers about 2 MiB."""
READ_BYTES = 1 << 16


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
        raise ValueError(
            f"--prometheus {text!r}: the port is not a number from 0 to 65535"
        ) from None
    return text.rstrip("/")


class PrometheusClient:
    """Instant queries against one Prometheus server."""

    def __init__(
        self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = MAX_ANSWER_BYTES
    ) -> None:
        self.url = check_url(url)
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._parts = urllib.parse.urlsplit(self.url)

    def query(self, expr: str) -> list[Series]:
        """Evaluate `expr` now; its vector. Raises `PrometheusError` with the reason."""
        body = urllib.parse.urlencode({"query": expr}).encode()
        status, raw = self._exchange(body)
        try:
            if status != 200:
                raise PrometheusError(self._http_problem(status, raw))
            return read_answer(raw, self.url)
        except PrometheusError:
            raise
        except Exception as error:  # noqa: BLE001 (a backstop: see `_unreadable`)
            raise PrometheusError(self._unreadable(error)) from None

    def _connection(self) -> http.client.HTTPConnection:
        kind = (
            http.client.HTTPSConnection
            if self._parts.scheme == "https"
            else http.client.HTTPConnection
        )
        return kind(self._parts.hostname or "", self._parts.port, timeout=self.timeout_s)

    def _exchange(self, body: bytes) -> tuple[int, bytes]:
        """The status and the body of one POST, within the deadline and the size cap."""
        connection = self._connection()
        deadline = Deadline(self.timeout_s, lambda: connection.sock)
        got: list[bytes] = []
        try:
            connection.request(
                "POST",
                f"{self._parts.path}/api/v1/query",
                body,
                {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"},
            )
            deadline.left()
            answer = connection.getresponse()
            self._check_length(answer.getheader("Content-Length"))
            return answer.status, self._body(answer, connection, deadline, got)
        except TimeoutError:
            raise PrometheusError(self._late(got)) from None
        except (OSError, http.client.HTTPException) as error:
            if deadline.passed.is_set():
                raise PrometheusError(self._late(got)) from None
            raise PrometheusError(
                f"cannot reach Prometheus at {self.url}: {said(str(error) or type(error).__name__)}"
            ) from None
        except PrometheusError:
            raise
        except Exception as error:  # noqa: BLE001 (a backstop: see `_unreadable`)
            raise PrometheusError(self._unreadable(error)) from None
        finally:
            deadline.cancel()
            connection.close()

    def _body(
        self,
        answer: http.client.HTTPResponse,
        connection: http.client.HTTPConnection,
        deadline: Deadline,
        got: list[bytes],
    ) -> bytes:
        size = 0
        while True:
            if connection.sock is not None:
                connection.sock.settimeout(deadline.left())
            chunk = answer.read1(READ_BYTES)
            deadline.left()  # a cut socket reads as the end of the body: it is not
            if not chunk:
                return b"".join(got)
            size += len(chunk)
            if size > self.max_bytes:
                raise PrometheusError(self._too_big())
            got.append(chunk)

    def _check_length(self, header: str | None) -> None:
        # str.isdigit() is true of "²", which int() refuses: only ASCII digits are a length.
        # int() refuses thousands of digits: a length of more than 18 is over any cap anyway.
        length = header.strip().lstrip("0") if header is not None else ""
        if (
            length.isascii()
            and length.isdigit()
            and (len(length) > 18 or int(length) > self.max_bytes)
        ):
            raise PrometheusError(self._too_big())

    def _too_big(self) -> str:
        return (
            f"Prometheus at {self.url} answered more than {fmt_bytes(self.max_bytes)}; "
            "gave up reading (is it the Prometheus server's URL?)"
        )

    def _unreadable(self, error: Exception) -> str:
        # The server chooses every byte: an answer that trips a check nobody thought of is
        # still one line, so the fleet view keeps its rows and tries again.
        return (
            f"Prometheus at {self.url} gave an answer gpuherd cannot read: "
            f"{said(f'{type(error).__name__}: {error}')}"
        )

    def _late(self, got: list[bytes]) -> str:
        if not got:
            return f"no answer from {self.url} within {self.timeout_s:g} s"
        size = fmt_bytes(sum(len(chunk) for chunk in got))
        return (
            f"no whole answer from {self.url} within {self.timeout_s:g} s ({size} came); "
            "gave up reading"
        )

    def _http_problem(self, status: int, raw: bytes) -> str:
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and doc.get("error"):
            return f"Prometheus at {self.url}: {said(doc['error'])}"
        return f"{self.url} answered HTTP {status} to a query: is it the Prometheus server's URL?"

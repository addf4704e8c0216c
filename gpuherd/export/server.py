"""The exporter's HTTP(S) server: `GET /metrics` and nothing else.

Not `prometheus_client.start_http_server`: that one answers every path and method it is sent.
This one answers `GET /metrics` (a query string is ignored) with the registry's text, 405 to any
other method on that path, 404 to every other path, and never logs a request line. TLS, when a
certificate and key are given, is set up per connection on the connection's own thread, so a
client that never finishes its handshake holds only that thread.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from collectors.base import GpuherdError
from gpuherd.export.address import METRICS_PATH, ListenAddress

REQUEST_TIMEOUT_S = 10.0
"""A connection idle this long is closed (a slow or stuck client holds one thread, briefly)."""


class ExporterError(GpuherdError):
    """The exporter cannot start: the address, the port, the certificate or the key."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="metrics")


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context for `--metrics-cert`/`--metrics-key`; `ExporterError` if they don't fit."""
    for flag, path in (("--metrics-cert", cert), ("--metrics-key", key)):
        if not os.path.isfile(path):
            raise ExporterError(f"{flag} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as error:
        if "KEY_VALUES_MISMATCH" in str(error) or "key values mismatch" in str(error):
            raise ExporterError(f"--metrics-cert {cert} does not match --metrics-key {key}") \
                from None
        raise ExporterError(f"--metrics-cert {cert} / --metrics-key {key}: not a PEM "
                            f"certificate and key ({error.reason or error})") from None
    except OSError as error:
        raise ExporterError(f"{error.filename or cert}: {error.strerror or error}") from None
    return context


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = REQUEST_TIMEOUT_S

    def version_string(self) -> str:
        """The Server header: no Python version for a scanner to match."""
        return "gpuherd"

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        path = self.path.split("?", 1)[0]
        if path != METRICS_PATH:
            self._plain(404, "not found: gpuherd answers GET /metrics only\n")
            return
        try:
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            body = encoder(self.server.registry)
        except Exception as error:  # a bug: this scrape fails, the server goes on
            self.server.report(f"metrics: a scrape failed: {type(error).__name__}: {error}")
            self._plain(500, "the scrape failed; see the exporter's stderr\n")
            return
        self._send(200, content_type, body)

    def _refuse(self) -> None:
        if self.path.split("?", 1)[0] == METRICS_PATH:
            self._plain(405, "method not allowed: use GET\n", allow=True)
        else:
            self._plain(404, "not found: gpuherd answers GET /metrics only\n")

    def __getattr__(self, name: str) -> Any:
        # http.server looks up `do_<METHOD>` and answers 501 when it is missing; every method
        # but GET gets 405 (or 404 off the metrics path) instead.
        if name.startswith("do_"):
            return self._refuse
        raise AttributeError(name)

    def _plain(self, code: int, text: str, allow: bool = False) -> None:
        self._send(code, "text/plain; charset=utf-8", text.encode(), allow)

    def _send(self, code: int, content_type: str, body: bytes, allow: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", "GET")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """Requests are not logged: a scrape every few seconds would flood stderr."""


class MetricsServer(ThreadingHTTPServer):
    """Serves one registry on one address; `start` runs it on a daemon thread."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: ListenAddress, registry: CollectorRegistry,
                 tls: ssl.SSLContext | None = None,
                 report: Callable[[str], None] | None = None) -> None:
        self.registry = registry
        self.tls = tls
        self.report = report or (lambda line: print(f"gpuherd: {line}", file=sys.stderr))
        self.listen = address
        try:
            infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        except socket.gaierror as error:
            raise ExporterError(f"--serve-metrics {address}: cannot resolve "
                                f"{address.host!r} ({error.strerror})") from None
        self.address_family = infos[0][0]
        bound = (str(infos[0][4][0]), int(infos[0][4][1]))
        try:
            super().__init__(bound, _Handler)
        except OSError as error:
            raise ExporterError(_bind_problem(address, error)) from None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port bound."""
        return int(self.server_address[1])

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs on the connection's thread: the TLS handshake happens here, not in accept."""
        if self.tls is not None:
            request.settimeout(REQUEST_TIMEOUT_S)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # not TLS, or gave up: nothing to answer
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer is not worth a line; anything else is said."""
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            self.report(f"metrics: a request failed: {type(error).__name__}: {error}")

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="export:http",
                                        kwargs={"poll_interval": 0.5}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(5.0)
        self.server_close()


def _bind_problem(address: ListenAddress, error: OSError) -> str:
    import errno

    if error.errno == errno.EADDRINUSE:
        return (f"--serve-metrics {address}: the port is in use (another exporter?); "
                "pick another port")
    if error.errno == errno.EACCES:
        return f"--serve-metrics {address}: not allowed to listen there (a port under 1024?)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"--serve-metrics {address}: {address.host} is not an address of this machine"
    return f"--serve-metrics {address}: cannot listen: {error.strerror or error}"

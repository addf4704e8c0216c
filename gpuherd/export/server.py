"""The exporter's HTTP(S) server: `GET /metrics` and nothing else.

Not `prometheus_client.start_http_server`: that one answers every path and method it is sent.
This one answers `GET /metrics` (a query string is ignored) with the registry's text, 405 to any
other method on that path, 404 to every other path, and never logs a request line. TLS, when a
certificate and key are given, is set up per connection on the connection's own thread, so a
client that never finishes its handshake holds only that thread; at most `MAX_CONNECTIONS` such
threads run, and a connection beyond them is refused at once. Each connection has
`CONNECTION_DEADLINE_S` in all, however slowly it trickles its bytes, so a slot held by a client
that never finishes is free again by then.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from collectors.base import GpuherdError
from gpuherd.common.deadline import Deadline
from gpuherd.export.address import METRICS_PATH, ListenAddress
from gpuherd.present.format import visible

REQUEST_TIMEOUT_S = 10.0
"""A connection idle this long is closed (a slow or stuck client holds one thread, briefly)."""
CONNECTION_DEADLINE_S = 10.0
"""A connection open this long is cut, whatever it is doing: the idle timeout is per read, and a
client sending a byte every few seconds would hold its slot for ever. A scrape takes
milliseconds, and Prometheus gives up on one after 10 s (its default `scrape_timeout`)."""
MAX_CONNECTIONS = 32
"""Connections served at once, one thread each. One more is answered `503` at once (over TLS:
closed) without a thread, so a client that opens connections without end, or a slowloris one,
costs at most this many threads; Prometheus needs one per scrape."""
BUSY_REPORT_S = 60.0
"""Refusals are said on stderr at most once per this many seconds."""
_BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: 41\r\n\r\n"
    b"too many connections open; retry shortly\n"
)


class ExporterError(GpuherdError):
    """The exporter cannot start: the address, the port, the certificate or the key."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="metrics")


class _PassphraseAsked(Exception):
    """OpenSSL asked for the key's passphrase: the key is encrypted."""


def _no_passphrase(*_: Any) -> bytes:
    # Without a callback OpenSSL prompts on the terminal, and a service start hangs there.
    raise _PassphraseAsked


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context for `--metrics-cert`/`--metrics-key`; `ExporterError` if they don't fit.

    Each file is checked on its own first, so the message names the one at fault; an
    encrypted key is refused at once (a passphrase is never asked for).
    """
    for flag, path in (("--metrics-cert", cert), ("--metrics-key", key)):
        _check_readable(flag, path)
    try:
        ssl.create_default_context().load_verify_locations(cafile=cert)
    except ssl.SSLError as error:
        raise ExporterError(
            f"--metrics-cert {cert}: not a PEM certificate ({error.reason or error})"
        ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _PassphraseAsked:
        raise ExporterError(
            f"--metrics-key {key}: the key is encrypted and gpuherd never asks "
            "for a passphrase; give it an unencrypted key (openssl pkey -in "
            "KEY -out PLAIN.key), readable only by the exporter's user"
        ) from None
    except ssl.SSLError as error:
        if "KEY_VALUES_MISMATCH" in str(error) or "key values mismatch" in str(error):
            raise ExporterError(
                f"--metrics-cert {cert} does not match --metrics-key {key}"
            ) from None
        raise ExporterError(
            f"--metrics-key {key}: not a PEM private key ({error.reason or error})"
        ) from None
    except OSError as error:
        raise ExporterError(f"{error.filename or key}: {error.strerror or error}") from None
    return context


def _check_readable(flag: str, path: str) -> None:
    """`ExporterError` naming `flag` when `path` is missing, not a file or not readable."""
    if not os.path.isfile(path):
        raise ExporterError(f"{flag} {path}: no such file")
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise ExporterError(f"{flag} {path}: cannot read it ({error.strerror or error})") from None


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

    def __init__(
        self,
        address: ListenAddress,
        registry: CollectorRegistry,
        tls: ssl.SSLContext | None = None,
        report: Callable[[str], None] | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.registry = registry
        self.max_connections = max_connections
        self.refused = 0
        """Connections refused because `max_connections` were open."""
        self._slots = threading.BoundedSemaphore(max_connections)
        self._busy_said_at: float | None = None
        self.tls = tls
        self.report = report or (lambda line: print(f"gpuherd: {visible(line)}", file=sys.stderr))
        self.listen = address
        try:
            infos = socket.getaddrinfo(
                address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except socket.gaierror as error:
            raise ExporterError(
                f"--serve-metrics {address}: cannot resolve {address.host!r} ({error.strerror})"
            ) from None
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

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve on a thread of its own while a slot is free; else refuse at once."""
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started: nothing else gives the slot back
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """The connection's thread; its slot is given back however it ends."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: Any) -> None:
        self.refused += 1
        now = time.monotonic()
        if self._busy_said_at is None or now - self._busy_said_at >= BUSY_REPORT_S:
            self._busy_said_at = now
            self.report(
                f"metrics: {self.max_connections} connections open already; refusing "
                f"more ({self.refused} so far)"
            )
        if self.tls is None:  # over TLS a plain answer would be noise: just close
            try:
                request.setblocking(False)  # a fresh socket's buffer takes it, or nothing
                request.send(_BUSY_ANSWER)
            except OSError:
                pass
        self.shutdown_request(request)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs on the connection's thread: the TLS handshake happens here, not in accept.

        The whole connection, handshake, request and answer, gets `CONNECTION_DEADLINE_S`.
        """
        current = [request]  # the socket to cut: the TLS one once the handshake is done
        deadline = Deadline(CONNECTION_DEADLINE_S, lambda: current[0])
        try:
            if self.tls is not None:
                request.settimeout(REQUEST_TIMEOUT_S)
                try:
                    current[0] = self.tls.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError):
                    return  # not TLS, or gave up: nothing to answer
                if deadline.passed.is_set():
                    return  # cut while the socket was changing hands: it may not have been
            super().finish_request(current[0], client_address)
        finally:
            deadline.cancel()
            if current[0] is not request:  # the TLS socket: `shutdown_request` gets the other
                current[0].close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer is not worth a line; anything else is said."""
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            self.report(f"metrics: a request failed: {type(error).__name__}: {error}")

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(
            target=self.serve_forever,
            name="export:http",
            kwargs={"poll_interval": 0.5},
            daemon=True,
        )
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
        return (
            f"--serve-metrics {address}: the port is in use (another exporter?); pick another port"
        )
    if error.errno == errno.EACCES:
        return f"--serve-metrics {address}: not allowed to listen there (a port under 1024?)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"--serve-metrics {address}: {address.host} is not an address of this machine"
    return f"--serve-metrics {address}: cannot listen: {error.strerror or error}"

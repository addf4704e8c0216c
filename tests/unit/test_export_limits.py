"""The exporter under hostile conditions: encrypted or unreadable keys, connections without end."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.registry import CollectorRegistry

from gpuherd.export import server as server_module
from gpuherd.export.address import parse_listen
from gpuherd.export.server import (
    CONNECTION_DEADLINE_S,
    MAX_CONNECTIONS,
    ExporterError,
    MetricsServer,
    tls_context,
)
from tests.privileges import as_other_user, shared_directory
from tests.prometheus import free_port
from tests.unit.test_export_server import SESSION, make_cert, one_line, raw, request

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


REPO = Path(__file__).resolve().parents[2]


def encrypted_key(folder: Path) -> tuple[Path, Path]:
    if not shutil.which("openssl"):
        pytest.skip("the openssl CLI makes the encrypted test key")
    cert, key = folder / "enc.crt", folder / "enc.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-passout",
            "pass:secret",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )
    assert b"ENCRYPTED" in key.read_bytes()
    return cert, key


def test_an_encrypted_key_is_refused_without_asking_even_on_a_terminal(tmp_path: Path) -> None:
    # OpenSSL prompts on the controlling terminal for a passphrase: a service started from one
    # (or a tmux pane) would wait there for ever. `script` gives the command a terminal.
    if not shutil.which("script"):
        pytest.skip("script (util-linux) gives the command a terminal")
    cert, key = encrypted_key(tmp_path)
    command = " ".join(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "serve-metrics",
            str(free_port()),
            "--replay",
            str(SESSION),
            "--metrics-cert",
            str(cert),
            "--metrics-key",
            str(key),
        ]
    )
    try:
        done = subprocess.run(
            ["script", "-qec", command, "/dev/null"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the exporter waited for a passphrase")
    assert done.returncode == 2, done.stdout
    said = [line for line in done.stdout.splitlines() if line.strip()]
    assert said == [
        f"gpuherd: metrics: --metrics-key {key}: the key is encrypted and gpuherd "
        "never asks for a passphrase; give it an unencrypted key (openssl pkey -in "
        "KEY -out PLAIN.key), readable only by the exporter's user"
    ]


def test_an_unreadable_key_is_the_keys_fault_not_the_certificates() -> None:
    with shared_directory() as folder:
        cert, key = make_cert(folder, "server")
        cert.chmod(0o644)
        key.chmod(0o600)  # root's: the other user may read the certificate only
        done = subprocess.run(
            as_other_user(
                [
                    sys.executable,
                    "-m",
                    "gpuherd",
                    "serve-metrics",
                    str(free_port()),
                    "--replay",
                    str(SESSION),
                    "--metrics-cert",
                    str(cert),
                    "--metrics-key",
                    str(key),
                ]
            ),
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        f"gpuherd: metrics: --metrics-key {key}: cannot read it (Permission denied)"
    )


def test_a_file_that_is_no_key_or_no_certificate_is_named(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "server")
    junk = tmp_path / "junk.pem"
    junk.write_text("not pem at all\n")
    with pytest.raises(ExporterError, match=f"^--metrics-key {junk}: not a PEM private key"):
        tls_context(str(cert), str(junk))
    with pytest.raises(ExporterError, match=f"^--metrics-cert {junk}: not a PEM certificate"):
        tls_context(str(junk), str(key))
    with pytest.raises(ExporterError, match=f"^--metrics-cert {key}: not a PEM certificate"):
        tls_context(str(key), str(key))  # the key given twice: the certificate is at fault
    assert isinstance(tls_context(str(cert), str(key)), ssl.SSLContext)


def idle(port: int) -> socket.socket:
    """A connection that sends nothing: its thread waits for a request line."""
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def answer_unasked(port: int) -> str:
    """What the server says to a connection before it sends anything (a refusal is at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_connections_beyond_the_cap_are_refused_without_a_thread() -> None:
    said: list[str] = []
    server = MetricsServer(
        parse_listen(str(free_port())), CollectorRegistry(), report=said.append, max_connections=4
    )
    server.start()
    before = threading.active_count()
    held = [idle(server.port) for _ in range(4)]
    try:
        # Accepted in order: by the time the fifth is accepted the four hold every slot.
        refused = [answer_unasked(server.port) for _ in range(20)]
        assert {answer.split(" ", 2)[1] for answer in refused} == {"503"}
        assert refused[0].endswith("too many connections open; retry shortly\n")
        # Two threads for a served connection (it and its deadline's timer), none for a refused
        assert threading.active_count() <= before + 2 * 4
        assert server.refused == 20
        assert said == ["metrics: 4 connections open already; refusing more (1 so far)"]
        held.pop().close()  # its thread reads the end of the stream and gives its slot back
        for _ in range(200):
            code, _ = raw(server.port, request("GET", "/metrics"))
            if code == 200:
                break
        assert code == 200
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_the_default_cap_is_the_documented_one() -> None:
    server = MetricsServer(parse_listen(str(free_port())), CollectorRegistry())
    try:
        assert server.max_connections == MAX_CONNECTIONS == 32
    finally:
        server.server_close()
    docs = (REPO / "docs" / "fleet.md").read_text()
    assert f"{MAX_CONNECTIONS} connections" in docs


def test_the_documented_connection_deadline_is_the_servers() -> None:
    docs = (REPO / "docs" / "fleet.md").read_text()
    assert f"gets **{CONNECTION_DEADLINE_S:g} s in all**" in docs


def test_clients_trickling_a_byte_at_a_time_lose_their_slots_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each trickler sends a byte well within the idle timeout, which is per read: only a
    # deadline on the whole connection frees the slots it holds for a real scrape. Four
    # slots and a 4 s deadline (read at each accept), not 32 and 10 s: the same cut, sooner.
    deadline_s, slots = 4.0, 4
    monkeypatch.setattr(server_module, "CONNECTION_DEADLINE_S", deadline_s)
    server = MetricsServer(
        parse_listen(str(free_port())),
        CollectorRegistry(),
        report=lambda line: None,
        max_connections=slots,
    )
    server.start()
    started = time.monotonic()  # before connecting: each deadline runs from its accept
    tricklers = [idle(server.port) for _ in range(slots)]
    bound_s = deadline_s + 4.0  # under the server's own 10 s: the shortened deadline cut them
    try:
        for sock in tricklers:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        while raw(server.port, request("GET", "/metrics"))[0] == 503:
            if time.monotonic() - started > bound_s:
                pytest.fail(f"every slot still held {bound_s:g} s on")
            for sock in tricklers:
                try:
                    sock.send(b"a")
                except OSError:
                    pass  # cut already
            time.sleep(1.0)
        took = time.monotonic() - started
        assert took > deadline_s - 1.0  # the tricklers did hold the slots till then
        assert server.refused > 0
        for sock in tricklers:  # each was cut, not left open
            sock.settimeout(deadline_s)
            try:
                assert sock.recv(65536) == b""
            except ConnectionResetError:
                pass  # closed with the bytes it sent after the cut unread
    finally:
        for sock in tricklers:
            sock.close()
        server.stop()

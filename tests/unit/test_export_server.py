"""The exporter's server over real sockets: GET /metrics only, loopback by default, TLS, errors."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import Sampled
from collectors.samples import GpuSample, GpuTick
from gpuherd.export.address import parse_listen
from gpuherd.export.exporter import Exporter
from gpuherd.export.server import ExporterError
from tests.fakes import GiB
from tests.prometheus import free_port
from tests.usage_errors import error_line

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "tests" / "data" / "sessions" / "e2e"


def raw(port: int, request: bytes, tls: ssl.SSLContext | None = None) -> tuple[int, str]:
    """Send `request` as it is; the status code and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        sock = tls.wrap_socket(plain, server_hostname="localhost") if tls else plain
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("utf-8", "replace")
    return int(answer.split(" ", 2)[1]), answer


def request(method: str, path: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    served = Exporter(parse_listen(str(free_port())), "box-1", report=lambda line: None)
    served.emit(
        Sampled("nvml", GpuTick(1.0, (GpuSample(0, "GPU-a", "H100", memory_used_bytes=3 * GiB),)))
    )
    served.start()
    yield served
    served.close()


def test_binds_loopback_unless_told_otherwise(exporter: Exporter) -> None:
    assert exporter.server.server_address[0] == "127.0.0.1"
    assert exporter.url == f"http://127.0.0.1:{exporter.server.port}/metrics"


def test_get_of_the_metrics_path_is_the_only_thing_answered(exporter: Exporter) -> None:
    port = exporter.server.port
    code, answer = raw(port, request("GET", "/metrics"))
    assert code == 200
    assert (
        'gpuherd_gpu_memory_used_bytes{gpu="0",host="box-1",uuid="GPU-a"} 3.221225472e+09' in answer
    )
    assert "Server: gpuherd\r\n" in answer and "Python" not in answer.split("\r\n\r\n")[0]
    assert raw(port, request("GET", "/metrics?name[]=x"))[0] == 200
    for path in ("/", "/metrics/", "/favicon.ico", "/../etc/passwd", "/METRICS"):
        assert raw(port, request("GET", path))[0] == 404, path
    for method in ("POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "BREW"):
        code, answer = raw(port, request(method, "/metrics"))
        assert code == 405, method
        assert "Allow: GET" in answer
    assert raw(port, request("POST", "/"))[0] == 404


def test_a_scrape_that_raises_is_a_500_and_the_next_one_works(
    exporter: Exporter, monkeypatch
) -> None:
    port = exporter.server.port
    said: list[str] = []
    monkeypatch.setattr(exporter.server, "report", said.append)
    real = exporter.collector.collect

    def broken():  # a bug below the parts' own guard: the whole answer fails
        raise RuntimeError("broken registry")
        yield  # pragma: no cover

    monkeypatch.setattr(exporter.collector, "collect", broken)
    code, answer = raw(port, request("GET", "/metrics"))
    assert code == 500 and "Traceback" not in answer
    assert said == ["metrics: a scrape failed: RuntimeError: broken registry"]
    monkeypatch.setattr(exporter.collector, "collect", real)
    assert raw(port, request("GET", "/metrics"))[0] == 200


def test_a_port_in_use_is_an_exporter_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ExporterError, match=f"127.0.0.1:{port}: the port is in use"):
            Exporter(parse_listen(str(port)), "box-1")


def gpuherd(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("70000", "the port must be a number from 1 to 65535"),
        ("0", "the port must be a number from 1 to 65535"),
        (":9400", "give the host before ':'"),
        ("::1:9400", "write an IPv6 address in brackets"),
        ("[::1]9400", "an IPv6 address is written [ADDRESS]:PORT"),
        ("local host:9400", "'local host' is not a host name or address"),
        ("http://x:9400", "expected [HOST:]PORT, not a URL"),
    ],
)
def test_a_bad_host_port_is_one_line_and_exit_2(listen: str, says: str) -> None:
    done = gpuherd("serve-metrics", listen, "--replay", str(SESSION))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = error_line(done.stderr)
    assert last.startswith(f"gpuherd serve-metrics: error: --serve-metrics {listen!r}: {says}")


def test_port_in_use_at_start_is_one_line_and_exit_2_for_every_mode(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = gpuherd("serve-metrics", str(port), "--replay", str(SESSION))
        recorded = gpuherd(
            "record",
            str(tmp_path / "s"),
            "--duration",
            "5s",
            "--serve-metrics",
            f"127.0.0.1:{port}",
        )
    for done in (served, recorded):
        assert done.returncode == 2
        assert one_line(done.stderr) == (
            f"gpuherd: metrics: --serve-metrics 127.0.0.1:{port}: "
            "the port is in use (another exporter?); pick "
            "another port"
        )
    assert not (tmp_path / "s").exists()  # nothing was started, nothing written


def test_tls_flags_come_in_pairs_and_only_with_serve_metrics(tmp_path: Path) -> None:
    done = gpuherd("serve-metrics", "9400", "--metrics-cert", "c.pem")
    assert done.returncode == 2 and "give --metrics-cert and --metrics-key together" in done.stderr
    done = gpuherd("replay", str(SESSION), "--metrics-cert", "c.pem", "--metrics-key", "k.pem")
    assert done.returncode == 2 and "--metrics-cert needs --serve-metrics" in done.stderr


def make_cert(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, with the openssl CLI or cryptography."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    if shutil.which("openssl"):
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    pytest.importorskip(
        "cryptography",
        reason="neither the openssl CLI nor the cryptography "
        "package is here to make a test certificate",
    )
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


def test_tls_serves_metrics_to_a_client_that_trusts_the_certificate(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "server")
    served = Exporter(parse_listen(str(free_port())), "box-1", cert=str(cert), key=str(key))
    served.start()
    try:
        assert served.url.startswith("https://127.0.0.1:")
        client = ssl.create_default_context(cafile=str(cert))
        code, answer = raw(served.server.port, request("GET", "/metrics"), client)
        assert code == 200 and 'gpuherd_exporter_info{host="box-1"' in answer
        assert raw(served.server.port, request("POST", "/metrics"), client)[0] == 405
        with pytest.raises((ConnectionError, OSError, ValueError, IndexError)):
            raw(served.server.port, request("GET", "/metrics"))  # plain HTTP gets no answer
        assert raw(served.server.port, request("GET", "/metrics"), client)[0] == 200
    finally:
        served.close()


def test_a_certificate_that_does_not_match_its_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cert, _ = make_cert(tmp_path, "one")
    _, other_key = make_cert(tmp_path, "two")
    done = gpuherd(
        "serve-metrics",
        str(free_port()),
        "--replay",
        str(SESSION),
        "--metrics-cert",
        str(cert),
        "--metrics-key",
        str(other_key),
    )
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        f"gpuherd: metrics: --metrics-cert {cert} does not match --metrics-key {other_key}"
    )
    missing = gpuherd(
        "serve-metrics",
        str(free_port()),
        "--replay",
        str(SESSION),
        "--metrics-cert",
        str(tmp_path / "nope.crt"),
        "--metrics-key",
        str(other_key),
    )
    assert missing.returncode == 2
    assert one_line(missing.stderr) == (
        f"gpuherd: metrics: --metrics-cert {tmp_path / 'nope.crt'}: no such file"
    )


def test_a_session_that_cannot_be_replayed_is_one_line_and_exit_2() -> None:
    bad = REPO / "tests" / "data" / "sessions" / "no_meta"
    done = gpuherd("serve-metrics", str(free_port()), "--replay", str(bad))
    assert done.returncode == 2
    assert one_line(done.stderr) == (f"gpuherd: {bad}: not a gpuherd session (no meta.json in it)")

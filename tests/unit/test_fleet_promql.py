"""The query API client and `gpuherd fleet`'s start-up checks, against loopback servers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuherd.fleet.promql import PrometheusClient, PrometheusError
from tests.prometheus import free_port
from tests.usage_errors import error_line

REPO = Path(__file__).resolve().parents[2]
Answer = Callable[[str], tuple[int, bytes]]


@pytest.fixture
def stub() -> Iterator[Callable[[Answer], str]]:
    """A loopback HTTP server answering POSTs with `answer(body)`; its URL."""
    servers: list[ThreadingHTTPServer] = []

    def serve(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                code, payload = answer(body)
                try:
                    self.send_response(code)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting (the timeout test)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def vector(*elements: dict) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": list(elements)}}
    ).encode()


def test_a_vector_is_read_with_labels_values_and_the_evaluation_time(stub) -> None:
    seen: list[str] = []

    def answer(body: str) -> tuple[int, bytes]:
        seen.append(body)
        return 200, vector(
            {"metric": {"host": "a", "gpu": "0"}, "value": [1700.5, "42"]},
            {"metric": {"host": "b"}, "value": [1700.5, "NaN"]},
        )

    client = PrometheusClient(stub(answer) + "/")
    found = client.query("up == 1")
    assert seen == ["query=up+%3D%3D+1"]
    assert [(x.labels, x.value, x.at) for x in found[:1]] == [
        ({"host": "a", "gpu": "0"}, 42.0, 1700.5)
    ]
    assert len(found) == 2 and found[1].value != found[1].value  # NaN kept


def test_one_malformed_element_is_one_line_naming_it(stub) -> None:
    url = stub(
        lambda body: (
            200,
            vector(
                {"metric": {"host": "a"}, "value": [1700.5, "1"]}, {"metric": {}, "value": "broken"}
            ),
        )
    )
    with pytest.raises(PrometheusError) as caught:
        PrometheusClient(url).query("up")
    assert caught.value.msg == (
        f"Prometheus at {url} gave a malformed answer: "
        'data.result[1].value is the string "broken", not a '
        '[time, "value"] pair'
    )


def test_an_unreachable_server_is_one_clear_error() -> None:
    port = free_port()
    with pytest.raises(PrometheusError) as caught:
        PrometheusClient(f"http://127.0.0.1:{port}").query("up")
    assert caught.value.msg.startswith(f"cannot reach Prometheus at http://127.0.0.1:{port}: ")
    assert "Connection refused" in caught.value.msg


def test_a_server_that_is_not_prometheus_says_so(stub) -> None:
    url = stub(lambda body: (404, b"<html>not found</html>"))
    with pytest.raises(
        PrometheusError, match="answered HTTP 404 to a query: is it the Prometheus server's URL"
    ):
        PrometheusClient(url).query("up")
    url = stub(lambda body: (200, b"# HELP gpuherd_gpu_memory_used_bytes ..."))
    with pytest.raises(PrometheusError, match="does not answer like Prometheus's query API"):
        PrometheusClient(url).query("up")


def test_a_query_error_carries_prometheus_own_words(stub) -> None:
    url = stub(
        lambda body: (
            400,
            json.dumps(
                {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
            ).encode(),
        )
    )
    with pytest.raises(PrometheusError, match=r"Prometheus at .*: parse error at char 3"):
        PrometheusClient(url).query("up ==")


def test_a_server_that_hangs_is_a_timeout_not_a_hang(stub) -> None:
    def slow(body: str) -> tuple[int, bytes]:
        time.sleep(3)
        return 200, vector()

    url = stub(slow)
    with pytest.raises(PrometheusError, match=r"no answer from http://127.0.0.1:\d+ within 0.5 s$"):
        PrometheusClient(url, timeout_s=0.5).query("up")


def fleet(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", "fleet", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_fleet_with_an_unreachable_prometheus_is_one_line_and_exit_2() -> None:
    port = free_port()
    done = fleet("--prometheus", f"http://127.0.0.1:{port}")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"gpuherd: fleet: cannot reach Prometheus at http://127.0.0.1:{port}: "
    )
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_fleet_with_a_prometheus_without_gpu_series_is_one_line_and_exit_2(stub) -> None:
    url = stub(lambda body: (200, vector()))
    done = fleet("--prometheus", url)
    assert done.returncode == 2
    assert done.stderr == (
        f"gpuherd: fleet: Prometheus at {url} holds no gpuherd_gpu_* or "
        "DCGM_FI_DEV_* series: add a scrape of `gpuherd serve-metrics` or "
        "dcgm-exporter (docs/fleet.md)\n"
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--prometheus", "127.0.0.1:9090"], "expected a URL such as http://127.0.0.1:9090"),
        (["--prometheus", "http://x:99999"], "the port is not a number from 0 to 65535"),
        (["--prometheus", "http://x/?q=1"], "without ?query"),
        (["--prometheus", "http://x", "--interval", "0.01"], "--interval must be at least 0.2 s"),
        (["--prometheus", "http://x", "--stale-after", "0"], "must be more than zero"),
    ],
)
def test_fleet_flags_are_checked_before_anything_runs(argv: list[str], says: str) -> None:
    done = fleet(*argv)
    assert done.returncode == 2 and says in error_line(done.stderr)

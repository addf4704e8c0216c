"""The query client against servers that do not behave: slow, endless, malformed answers.

Each server is a real threaded `http.server` on 127.0.0.1 that stops itself; the client under
test is the real one. The query runs on a thread the test joins with a bound, so a client that
would wait forever fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuherd.fleet.model import build_rows
from gpuherd.fleet.promql import PrometheusClient, PrometheusError
from gpuherd.present.format import visible

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


SERVER_LIFE_S = 20.0
"""A hostile server stops on its own after this long (or when the test ends)."""
Send = Callable[[BaseHTTPRequestHandler, threading.Event], None]


@pytest.fixture
def server() -> Iterator[Callable[[Send], str]]:
    """A loopback server whose every answer is written by `send(handler, stop)`; its URL."""
    stop = threading.Event()
    servers: list[ThreadingHTTPServer] = []

    def serve(send: Send) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    send(self, stop)
                except OSError:
                    pass  # the client gave up: what the tests want
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield serve
    stop.set()
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def bounded_query(client: PrometheusClient, bound_s: float) -> tuple[Any, float]:
    """The query's result or error, and how long it took; fails if it is still running."""
    out: list[Any] = []

    def ask() -> None:
        try:
            out.append(client.query("up"))
        except Exception as error:  # noqa: BLE001 (the test inspects whatever came out)
            out.append(error)

    started = time.monotonic()
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(bound_s)
    assert not thread.is_alive(), f"the query was still reading after {bound_s:g} s"
    return out[0], time.monotonic() - started


def drip(interval_s: float) -> Send:
    def send(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        ends = time.monotonic() + SERVER_LIFE_S
        while not stop.is_set() and time.monotonic() < ends:
            handler.wfile.write(b" ")
            handler.wfile.flush()
            stop.wait(interval_s)

    return send


def test_a_body_dripped_a_byte_every_2_s_ends_at_the_deadline(server) -> None:
    # Each byte comes within the old per-read timeout: only a deadline on the whole answer
    # stops this.
    client = PrometheusClient(server(drip(2.0)), timeout_s=3.0)
    error, took = bounded_query(client, 3.0 + 5.0)
    assert isinstance(error, PrometheusError)
    assert error.msg == (
        f"no whole answer from {client.url} within 3 s (2 B came); gave up reading"
    )
    assert took < 3.0 + 2.0


def test_a_body_chunked_forever_ends_at_the_deadline(server) -> None:
    def chunked(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        ends = time.monotonic() + SERVER_LIFE_S
        while not stop.is_set() and time.monotonic() < ends:
            handler.wfile.write(b"1\r\n \r\n")
            handler.wfile.flush()
            stop.wait(0.1)

    client = PrometheusClient(server(chunked), timeout_s=1.5)
    error, took = bounded_query(client, 1.5 + 5.0)
    assert isinstance(error, PrometheusError)
    assert error.msg.startswith(f"no whole answer from {client.url} within 1.5 s (")
    assert took < 1.5 + 2.0


def test_headers_dripped_forever_end_at_the_deadline(server) -> None:
    def slow_headers(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        ends = time.monotonic() + SERVER_LIFE_S
        while not stop.is_set() and time.monotonic() < ends:
            handler.wfile.write(b"a")
            handler.wfile.flush()
            stop.wait(0.2)

    client = PrometheusClient(server(slow_headers), timeout_s=1.0)
    error, took = bounded_query(client, 1.0 + 5.0)
    assert isinstance(error, PrometheusError)
    assert error.msg == f"no answer from {client.url} within 1 s"
    assert took < 1.0 + 2.0


def endless(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    handler.send_response(200)
    handler.end_headers()  # no length: the body ends when the connection does
    block = b'{"status": "success", ' * 4096
    sent, ends = 0, time.monotonic() + SERVER_LIFE_S
    while not stop.is_set() and time.monotonic() < ends and sent < 200 << 20:
        handler.wfile.write(block)
        sent += len(block)


def test_an_endless_answer_is_cut_at_the_size_cap_with_bounded_memory(server) -> None:
    client = PrometheusClient(server(endless), timeout_s=30.0, max_bytes=4 << 20)
    tracemalloc.start()
    try:
        error, _ = bounded_query(client, 30.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, PrometheusError)
    assert error.msg == (
        f"Prometheus at {client.url} answered more than 4.0 MiB; gave up "
        "reading (is it the Prometheus server's URL?)"
    )
    assert peak < 3 * (4 << 20)


def test_a_length_above_the_cap_is_refused_before_reading(server) -> None:
    def huge(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 40))
        handler.end_headers()
        stop.wait(SERVER_LIFE_S)

    client = PrometheusClient(server(huge), timeout_s=5.0, max_bytes=1 << 20)
    error, took = bounded_query(client, 5.0)
    assert isinstance(error, PrometheusError) and "answered more than 1.0 MiB" in error.msg
    assert took < 4.0  # refused on the header, not at the deadline


def answering(body: bytes) -> Send:
    def send(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return send


def one_shown_line(msg: str) -> bool:
    """One line, with nothing in it that would steer a terminal."""
    return bool(msg) and visible(msg) == msg


def vector(*elements: object) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(elements)}}


def element(metric: object, value: object = None) -> dict[str, object]:
    return {"metric": metric, "value": [1700.0, "1"] if value is None else value}


GPU = {"fleet_q": "used", "host": "a", "gpu": "0"}
MALFORMED = [
    (b"[" * 100_000 + b"]" * 100_000, "answered JSON nested too deeply to be Prometheus's"),
    (
        {"status": "success", "data": {"resultType": "vector", "result": 5}},
        "data.result is a number, not a list",
    ),
    (vector(element(["host", "a"])), "data.result[0].metric is a list of 2, not an object"),
    (vector(element(None)), "data.result[0].metric is null (or missing), not an object"),
    (vector(element({"host": 5})), "data.result[0].metric[host] is a number, not a string"),
    (
        vector(element(GPU, [1700.0, 5])),
        "data.result[0].value[1] is a number, not a number in a string",
    ),
    (vector(element(GPU, ["x", "5"])), "data.result[0].value[0] is the string"),
    (vector(element(GPU, [1700.0, "5", 1])), "data.result[0].value is a list of 3"),
    ({"status": "success", "data": []}, "data is a list of 0, not an object"),
    (
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        "answered a matrix, not an instant vector",
    ),
    ({"status": "error", "error": "\x1b[2Jowned"}, ": \\x1b[2Jowned"),
]


@pytest.mark.parametrize(("answer", "says"), MALFORMED)
def test_each_malformed_answer_is_one_line_saying_where(server, answer: Any, says: str) -> None:
    body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    error, _ = bounded_query(PrometheusClient(server(answering(body))), 10.0)
    assert isinstance(error, PrometheusError), error
    assert says in error.msg and one_shown_line(error.msg)


def test_a_gpu_label_that_is_a_digit_but_not_a_number_is_a_row(server) -> None:
    body = json.dumps(
        vector(
            element(GPU | {"gpu": "²"}, [1700.0, "1"]), element(GPU | {"gpu": "1"}, [1700.0, "2"])
        )
    ).encode()
    series, _ = bounded_query(PrometheusClient(server(answering(body))), 10.0)
    rows, _ = build_rows(series, 60.0)
    assert [row.gpu for row in rows] == ["1", "²"]


def answering_with_length(body: bytes, length: str) -> Send:
    """`body`, under a `Content-Length` header the server chose."""

    def send(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", length)
        handler.end_headers()
        handler.wfile.write(body)

    return send


ONE_ROW = json.dumps(vector(element(GPU, [1700.0, "1"]))).encode()


@pytest.mark.parametrize("length", ["²", " ³ ", "¹²³", "1²"])
def test_a_length_in_digits_that_are_not_ascii_is_no_length(server, length: str) -> None:
    # "²".isdigit() is true and int("²") raises; http.client reads such an answer to its end.
    series, _ = bounded_query(
        PrometheusClient(server(answering_with_length(ONE_ROW, length))), 10.0
    )
    assert not isinstance(series, BaseException), series
    assert [s.labels for s in series] == [GPU]


def test_a_length_of_thousands_of_digits_is_above_the_cap(server) -> None:
    # int() refuses a string of more than 4,300 digits; such a length is over any cap.
    client = PrometheusClient(server(answering_with_length(ONE_ROW, "9" * 5000)))
    error, _ = bounded_query(client, 10.0)
    assert isinstance(error, PrometheusError) and "answered more than 32.0 MiB" in error.msg


def test_a_length_of_many_leading_zeros_is_its_number(server) -> None:
    length = "0" * 5000 + str(len(ONE_ROW))
    series, _ = bounded_query(
        PrometheusClient(server(answering_with_length(ONE_ROW, length))), 10.0
    )
    assert not isinstance(series, BaseException), series
    assert [s.labels for s in series] == [GPU]


def test_a_time_too_large_for_a_float_is_a_malformed_answer(server) -> None:
    # JSON integers are unbounded: math.isfinite(10**400) raises OverflowError.
    body = json.dumps(vector(element(GPU, [10**400, "1"]))).encode()
    error, _ = bounded_query(PrometheusClient(server(answering(body))), 10.0)
    assert isinstance(error, PrometheusError), error
    assert "data.result[0].value[0] is a number, not a time in Unix seconds" in error.msg
    assert one_shown_line(error.msg)


def test_the_largest_time_a_float_holds_is_a_time(server) -> None:
    body = json.dumps(vector(element(GPU, [int(1.7e308), "1"]))).encode()
    series, _ = bounded_query(PrometheusClient(server(answering(body))), 10.0)
    assert not isinstance(series, BaseException), series
    assert series[0].at == 1.7e308


def test_a_gpu_label_of_thousands_of_digits_sorts_as_a_name(server) -> None:
    long_index = "7" * 5000  # int() refuses more than 4,300 digits
    body = json.dumps(
        vector(
            element(GPU | {"gpu": long_index}, [1700.0, "1"]),
            element(GPU | {"gpu": "999999999"}, [1700.0, "1"]),
            element(GPU | {"gpu": "2"}, [1700.0, "1"]),
        )
    ).encode()
    series, _ = bounded_query(PrometheusClient(server(answering(body))), 10.0)
    rows, _ = build_rows(series, 60.0)
    assert [row.gpu for row in rows] == ["2", "999999999", long_index]


def test_an_answer_that_trips_an_unforeseen_error_is_one_line(server, monkeypatch) -> None:
    # Stands in for a check nobody has thought of yet: whatever the reading raises, the
    # client says one line, so the fleet view keeps its rows and tries again.
    import gpuherd.fleet.answer

    def trips(*args: object) -> object:
        raise ArithmeticError("\x1b[2Jsomething\nunforeseen")

    monkeypatch.setattr(gpuherd.fleet.answer, "_series", trips)
    body = json.dumps(vector(element(GPU))).encode()
    client = PrometheusClient(server(answering(body)))
    error, _ = bounded_query(client, 10.0)
    assert isinstance(error, PrometheusError), error
    assert error.msg == (
        f"Prometheus at {client.url} gave an answer gpuherd cannot read: "
        "ArithmeticError: \\x1b[2Jsomething\\x0aunforeseen"
    )


HUGE = st.integers(min_value=10**308, max_value=10**400) | st.integers(
    max_value=-(10**308), min_value=-(10**400)
)
"""Integers JSON carries and a float cannot."""
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.integers()
    | HUGE
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
LABELS = st.dictionaries(
    st.sampled_from(
        [
            "fleet_q",
            "host",
            "gpu",
            "user",
            "task",
            "status",
            "kind",
            "model",
            "Hostname",
            "instance",
        ]
    ),
    st.sampled_from(
        [
            "used",
            "total",
            "util",
            "fresh",
            "user",
            "status",
            "finding",
            "task_gpu",
            "dcgm_used",
            "dcgm_free",
            "0",
            "1",
            "²",
            "-1",
            "",
            "\x1b[2J",
            "9" * 5000,
            "0" * 4400 + "1",
        ]
    )
    | st.text(),
    max_size=6,
)
VALUES = (
    st.sampled_from(["1", "-4.7", "NaN", "+Inf", "-Inf", "1e308", "0", "-0", "3e9"])
    | st.floats().map(repr)
    | JSON
)
NEAR_VALID = st.builds(
    lambda items: vector(*items),
    st.lists(
        st.builds(
            lambda m, at, v: {"metric": m, "value": [at, v]},
            LABELS | JSON,
            st.floats() | st.integers() | HUGE | JSON,
            VALUES,
        ),
        max_size=8,
    ),
)
LENGTHS = (
    st.none()
    | st.sampled_from(["²", "¹²", "9" * 5000, "0" * 5000 + "1"])
    | st.text(alphabet="0123456789²³¹ ", max_size=6)
)
"""A `Content-Length` the server chose: None is the body's true length."""


@pytest.fixture(scope="module")
def replay_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """One loopback server answering with `bodies["next"]` (for hypothesis)."""
    bodies: dict[str, Any] = {"next": b"", "length": None}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = bodies["next"]
            self.send_response(200)
            self.send_header("Content-Length", bodies["length"] or str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", bodies
    httpd.shutdown()
    httpd.server_close()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(JSON | NEAR_VALID | st.builds(lambda d: {"status": "success", "data": d}, JSON), LENGTHS)
@example({"status": "success", "data": {"resultType": "vector", "result": 5}}, None)
@example(vector({"metric": [], "value": [1, "1"]}), None)
@example(vector({"metric": None, "value": [1, "1"]}), None)
@example(vector({"metric": GPU | {"gpu": "²"}, "value": [1, "1"]}), None)
@example(
    vector(
        {"metric": GPU, "value": [1, "-4.7"]},
        {"metric": GPU | {"fleet_q": "total"}, "value": [1, "-0"]},
    ),
    None,
)
@example(vector({"metric": GPU, "value": [10**400, "1"]}), None)
@example(vector({"metric": GPU | {"gpu": "9" * 5000}, "value": [1, "1"]}), None)
@example(vector({"metric": GPU, "value": [1, "1"]}), "²")
def test_any_answer_is_rows_or_one_clear_line(
    replay_server, answer: Any, length: str | None
) -> None:
    url, bodies = replay_server
    bodies["next"] = json.dumps(answer).encode()
    bodies["length"] = length
    try:
        series = PrometheusClient(url).query("up")
    except PrometheusError as error:
        assert one_shown_line(error.msg)
        return
    rows, _ = build_rows(series, 60.0)
    for row in rows:
        for figure in (row.used_bytes, row.total_bytes, row.free_bytes, row.util_ratio):
            assert figure is None or figure >= 0  # what cannot be is `invalid`, not a number


def test_fleet_with_a_malformed_first_answer_is_one_line_and_exit_2(server) -> None:
    import subprocess
    import sys
    from pathlib import Path

    body = json.dumps({"status": "error", "error": "\x1b[2J\x1b]0;owned\x07" + "x" * 400})
    url = server(answering(body.encode()))
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "fleet", "--prometheus", url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = done.stderr.removesuffix("\n")
    assert "\n" not in line and line.startswith(
        f"gpuherd: fleet: Prometheus at {url}: \\x1b[2J\\x1b]0;owned\\x07xxx"
    )
    assert line.endswith("x…") and len(line) < 400  # the server's words are cut

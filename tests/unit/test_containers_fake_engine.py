"""The collector against a scripted Engine API on a unix socket: the answers a real engine gives
only in races (a container removed between listing and inspect, an inspect refused), served
from recorded JSON. Runs without Docker."""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from collectors.machine.containers import DockerCollector

DATA = Path(__file__).resolve().parents[1] / "data" / "docker"
LISTED = json.loads((DATA / "list_busy.json").read_text())[0]
INSPECT = json.loads((DATA / "inspect_busy_memory64m.json").read_text())
FRAMES = json.loads((DATA / "stream_busy_memory64m.json").read_text())
MiB = 1 << 20


class Engine:
    """What the scripted engine answers; tests change it between ticks."""

    def __init__(self) -> None:
        self.containers: dict[str, dict[str, Any]] = {}
        self.inspect_status: dict[str, int] = {}
        self.frame_gap_s = 0.05

    def add(self, cid: str, name: str) -> None:
        self.containers[cid] = {**LISTED, "Id": cid, "Names": [f"/{name}"]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Engine

    def log_message(self, *args: object) -> None:
        pass

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path.split("?")[0].split("/", 2)[-1]  # without the /v1.41 prefix
        if path == "version":
            self.reply(
                200,
                {"Version": "20.10.24", "ApiVersion": "1.41", "Components": [{"Name": "Engine"}]},
            )
        elif path == "containers/json":
            self.reply(200, list(self.engine.containers.values()))
        elif path.endswith("/json"):
            cid = path.split("/")[1]
            status = self.engine.inspect_status.get(cid, 200)
            body = {**INSPECT, "Id": cid} if status == 200 else {"message": f"error {status}"}
            self.reply(status if cid in self.engine.containers else 404, body)
        elif path.endswith("/stats"):
            self.stream(path.split("/")[1])
        else:
            self.reply(404, {"message": "page not found"})

    def stream(self, cid: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in FRAMES * 1000:
            if cid not in self.engine.containers:
                break  # removed: the engine ends the stream
            data = json.dumps(frame).encode() + b"\n"
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(self.engine.frame_gap_s)
        self.wfile.write(b"0\r\n\r\n")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Engine, dict[str, str]]]:
    state = Engine()
    handler = type("Bound", (Handler,), {"engine": state})
    server = Server(str(tmp_path / "engine.sock"), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, {"DOCKER_HOST": f"unix://{tmp_path}/engine.sock"}
    state.containers.clear()
    server.shutdown()
    server.server_close()


def tick_until(collector: DockerCollector, check, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while True:
        tick = collector.sample()
        if check(tick) or time.monotonic() > deadline:
            return tick
        time.sleep(0.05)


def test_recorded_frames_give_docker_stats_figures(engine) -> None:
    state, env = engine
    state.add("a" * 64, "trainer")
    collector = DockerCollector(environ=env)
    collector.open()
    tick = tick_until(collector, lambda t: t.containers[0].cpu_pct is not None)
    collector.close()
    (sample,) = tick.containers
    assert tick.engine == "Docker 20.10.24"
    assert sample.name == "trainer" and sample.memory_limit_bytes == 64 * MiB
    assert sample.started_at == pytest.approx(1795709555.419351694, abs=1e-6)
    # Each pair of consecutive recorded frames; the stream repeats them, so a pair may also be
    # the last frame followed by the first (a counter going back: no figure, never a tick).
    assert sample.cpu_pct in (pytest.approx(86.0749, abs=1e-3), pytest.approx(87.0439, abs=1e-3))


def test_a_container_gone_before_its_inspect_is_left_out_without_an_error(engine) -> None:
    state, env = engine
    state.add("a" * 64, "stays")
    state.add("b" * 64, "gone")
    state.inspect_status["b" * 64] = 404  # removed between the listing and the inspect
    collector = DockerCollector(environ=env)
    collector.open()
    tick = collector.sample()
    assert [c.name for c in tick.containers] == ["stays"]
    assert "b" * 64 not in collector.readers
    collector.close()


def test_an_inspect_the_engine_refuses_lists_the_container_and_asks_again(engine) -> None:
    state, env = engine
    state.add("a" * 64, "flaky")
    state.inspect_status["a" * 64] = 500
    collector = DockerCollector(environ=env)
    collector.open()
    first = collector.sample()
    assert first.containers[0].name == "flaky" and first.containers[0].started_at is None
    del state.inspect_status["a" * 64]
    second = collector.sample()
    assert second.containers[0].started_at == pytest.approx(1795709555.419351694, abs=1e-6)
    collector.close()


def test_a_removed_container_ends_its_reader(engine) -> None:
    state, env = engine
    state.add("a" * 64, "short-lived")
    collector = DockerCollector(environ=env)
    collector.open()
    tick_until(collector, lambda t: t.containers[0].memory_used_bytes is not None)
    reader = collector.readers["a" * 64]
    state.containers.clear()
    assert collector.sample().containers == ()
    assert collector.readers == {}
    reader.thread.join(5)
    assert not reader.alive and reader.error is None
    collector.close()

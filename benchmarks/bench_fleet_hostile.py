"""The fleet view's Prometheus client against servers that do not behave, beside a plain read.

Usage: python benchmarks/bench_fleet_hostile.py [--seconds S]

Three loopback servers answer every query badly: an endless body (as fast as the socket
takes it), a body dripped one byte every 2 s, and a chunked body that never ends. For each,
gpuherd's `PrometheusClient` runs one query and the benchmark reports how long it took to
give up and the peak memory it allocated meanwhile (tracemalloc). The anchor, in the same
run, is the plain `urllib.request` read the client used before (`urlopen(...).read()` with a
per-read timeout), run in a child process so nothing it holds stays in this one, and killed
after `--seconds`: its peak resident memory and whether it was still reading. Goals: every
hostile answer ends within the client's 5 s deadline, with memory under 2x its 32 MiB cap.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuherd.fleet.promql import MAX_ANSWER_BYTES, PrometheusClient  # noqa: E402

CHUNK = b"x" * 65536


def endless(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b'{"status":"success","data":{"resultType":"vector","result":["')
    while not stop.is_set():
        handler.wfile.write(CHUNK)


def drip(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "1000000")
    handler.end_headers()
    while not stop.wait(2.0):
        handler.wfile.write(b" ")
        handler.wfile.flush()


def chunked_forever(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    handler.send_response(200)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    while not stop.wait(0.5):
        handler.wfile.write(b"1\r\n \r\n")
        handler.wfile.flush()


def serve(
    send: Callable[[BaseHTTPRequestHandler, threading.Event], None], stop: threading.Event
) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            try:
                send(self, stop)
            except OSError:
                pass  # the client hung up

        do_GET = do_POST = _answer  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def measure(run: Callable[[], object], bound_s: float) -> tuple[float, int, bool]:
    """Seconds taken (or `bound_s`), peak bytes allocated, and whether it was still running."""
    tracemalloc.start()
    started = time.monotonic()
    thread = threading.Thread(target=lambda: _swallow(run), daemon=True)
    thread.start()
    thread.join(bound_s)
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak, thread.is_alive()


PLAIN_READ = """
import sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/api/v1/query", data=b"query=up")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
opener.open(request, timeout=5).read()
"""


def plain_read(url: str, bound_s: float) -> tuple[float, int, bool]:
    """The anchor in a child: seconds, its peak resident bytes, whether it was still reading."""
    child = subprocess.Popen([sys.executable, "-c", PLAIN_READ, url])
    process, peak = psutil.Process(child.pid), 0
    started = time.monotonic()
    while child.poll() is None and time.monotonic() - started < bound_s:
        try:
            peak = max(peak, process.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    elapsed, alive = time.monotonic() - started, child.poll() is None
    child.kill()
    child.wait()
    return elapsed, peak, alive


def _swallow(run: Callable[[], object]) -> None:
    try:
        run()
    except Exception:  # noqa: BLE001 (what matters here is when and at what size it stopped)
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=12.0,
        help="how long the plain read is let run before it is abandoned",
    )
    args = parser.parse_args()
    print(f"cap {MAX_ANSWER_BYTES >> 20} MiB; anchor stopped after {args.seconds:g} s")
    print(f"{'answer':<16} {'reader':<18} {'seconds':>8} {'peak MiB':>9}  still reading")
    for name, send in (
        ("endless", endless),
        ("drip 1 B / 2 s", drip),
        ("chunked forever", chunked_forever),
    ):
        stop = threading.Event()
        httpd = serve(send, stop)
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        client = PrometheusClient(url)
        elapsed, peak, alive = measure(lambda c=client: c.query("up"), args.seconds)
        print(
            f"{name:<16} {'gpuherd':<18} {elapsed:8.2f} {peak / 2**20:9.1f}  "
            f"{'yes' if alive else 'no'}",
            flush=True,
        )
        elapsed, peak, alive = plain_read(url, args.seconds)
        print(
            f"{name:<16} {'plain urllib read':<18} {elapsed:8.2f} {peak / 2**20:9.1f}  "
            f"{'yes' if alive else 'no'} (peak RSS)",
            flush=True,
        )
        stop.set()
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    main()

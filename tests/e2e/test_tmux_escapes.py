"""Escapes in what others wrote, in a real terminal: tmux shows them as text, never obeys them.

A log file really named with `ESC [2J` (and a colour, a C1 CSI, a right-to-left override)
followed under `--watch`, and Prometheus labels carrying the same in `gpuherd fleet`: the pane
shows the visible form, and the bytes gpuherd wrote to the terminal (tmux's `pipe-pane` copy)
never hold the sequences themselves.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

EVIL = "\x1b[2J\x1b[31mowned\x9b1;1H\u202e"
SHOWN = "\\x1b[2J\\x1b[31mowned\\x9b1;1H\\u202e"
OBEYED = (b"\x1b[31mowned", "\x9b".encode(), b"\x9b", "\u202e".encode())
"""What the terminal would get if the text were written raw (UTF-8 or not)."""


def start(pane: Pane, output: Path, *args: str) -> None:
    argv = ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "gpuherd", *args]
    command = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30"
    pane.start(command, 200, 40, output=output)


def quit_cleanly(pane: Pane) -> None:
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen


def test_a_log_named_with_escapes_under_watch_shows_its_name(pane: Pane, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / f"{EVIL}.log").write_text("step=10 loss=2.3100\n")
    output = tmp_path / "pane.bytes"
    start(pane, output, "--watch", str(runs))
    screen = pane.wait_for(lambda s: f"{SHOWN}.log" in s and "2.31" in s, timeout_s=30)
    assert screen.startswith("gpuherd  ") and "Tasks (1)" in screen  # nothing was cleared
    quit_cleanly(pane)
    written = output.read_bytes()
    assert not [seq for seq in OBEYED if seq in written]


@pytest.fixture
def prometheus_stand_in() -> Iterator[str]:
    """A loopback server answering the fleet's query with one GPU whose labels carry escapes."""

    def part(name: str, value: str, **labels: str) -> dict[str, object]:
        return {
            "metric": {"fleet_q": name, "host": f"box{EVIL}", "gpu": "0", **labels},
            "value": [1_700_000_000.0, value],
        }

    body = json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [
                    part("used", str(10 << 30)),
                    part("total", str(80 << 30)),
                    part("util", "0.5"),
                    part("fresh", "1699999999"),
                    part("user", str(10 << 30), user=f"eve{EVIL}"),
                    part("status", "1", task=f"t{EVIL}", status="running"),
                ],
            },
        }
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_fleet_labels_with_escapes_show_as_text(
    pane: Pane, tmp_path: Path, prometheus_stand_in: str
) -> None:
    output = tmp_path / "pane.bytes"
    start(pane, output, "fleet", "--prometheus", prometheus_stand_in, "--interval", "0.5")
    screen = pane.wait_for(lambda s: "box\\x1b[2J" in s and "10.0 / 80.0 GiB" in s, timeout_s=30)
    assert f"t{SHOWN} ok" in screen and "eve\\x1b[2J" in screen  # task and user labels
    assert "gpuherd fleet" in screen  # the title line is still there: nothing was cleared
    quit_cleanly(pane)
    written = output.read_bytes()
    assert not [seq for seq in OBEYED if seq in written]

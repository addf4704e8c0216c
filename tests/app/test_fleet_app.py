"""Pilot tests of the fleet view: rows in order, a failing Prometheus never empties the view,
the view recovers from a malformed answer, and what an exporter sent is shown as text."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from collectors.base import CollectorError
from gpuherd.fleet.model import FleetRow, FleetSnapshot, FleetTask, sort_key
from gpuherd.fleet.promql import PrometheusClient
from gpuherd.fleet.source import FleetSource
from tests.app.helpers import ScriptedCollector, until
from tests.fakes import GiB
from tui.fleet_app import FleetApp
from tui.widgets.fleet_table import FleetTable


def snapshot(*rows: FleetRow) -> FleetSnapshot:
    return FleetSnapshot(tuple(sorted(rows, key=sort_key)), 1_700_000_000.0, 0.004)


A0 = FleetRow(
    "a",
    "0",
    "gpuherd",
    "H100",
    70 * GiB,
    80 * GiB,
    0.9,
    "carol",
    60 * GiB,
    (FleetTask("cifar/train.log", "running", ("nan",)),),
)
B0 = FleetRow("b", "0", "gpuherd", "H100", 10 * GiB, 80 * GiB, 0.1, "dave", 9 * GiB)


def hosts(table: FleetTable) -> list[str]:
    return [" ".join(line.split()[:2]) for line in table.lines()]


async def test_rows_follow_free_memory_and_a_failing_prometheus_keeps_them() -> None:
    source = ScriptedCollector("prometheus", role="fleet")
    app = FleetApp(source, snapshot(A0, B0), url="http://127.0.0.1:9090")
    async with app.run_test(size=(200, 20)) as pilot:
        table = app.query_one(FleetTable)
        await until(pilot, lambda: len(table.lines()) == 2)
        assert hosts(table) == ["b 0", "a 0"]  # 70 GiB free before 10 GiB
        assert table.lines()[1].endswith("carol 60.0 GiB    cifar/train.log NaN")

        source.push(
            CollectorError("cannot reach Prometheus at http://127.0.0.1:9090: Connection refused")
        )
        await until(pilot, lambda: app.problem is not None)
        assert app.problem == (
            "cannot reach Prometheus at http://127.0.0.1:9090: Connection "
            "refused (showing the last answer; retrying)"
        )
        assert len(table.lines()) == 2  # the last answer stays

        busy_b = FleetRow("b", "0", "gpuherd", "H100", 79 * GiB, 80 * GiB, 1.0, "dave", 78 * GiB)
        stale_a = FleetRow("a", "0", "gpuherd", "H100", 70 * GiB, 80 * GiB, 0.9, stale=True)
        source.push(snapshot(stale_a, busy_b))
        await until(pilot, lambda: app.problem is None and "stale" in table.lines()[1])
        assert hosts(table) == ["b 0", "a stale"]
        title = str(app.query_one("#fleet-title").render())
        assert "2 hosts · 2 GPUs · 1 stale" in title
        source.finish()


async def test_a_narrow_terminal_keeps_the_tasks_and_a_long_fleet_scrolls() -> None:
    rows = [
        FleetRow(
            f"host-{n:02d}",
            "0",
            "gpuherd",
            "NVIDIA H100 80GB HBM3",
            n * GiB,
            80 * GiB,
            0.5,
            "carol",
            GiB,
            (FleetTask("cifar/train.log", "running"),),
        )
        for n in range(40)
    ]
    source = ScriptedCollector("prometheus", role="fleet")
    app = FleetApp(source, snapshot(*rows), url="http://127.0.0.1:9090")
    async with app.run_test(size=(120, 16)) as pilot:
        table = app.query_one(FleetTable)
        await until(pilot, lambda: len(table.lines()) == 40)
        header = table.render_line(0).text
        assert "MODEL" not in header and "TASKS" in header  # the model gives way below 150
        assert table.lines()[0].startswith(" host-00") and table.lines()[0].endswith(
            "carol 1.0 GiB     cifar/train.log ok"
        )
        assert "H100" not in table.lines()[0]
        assert table.render_line(1).text.startswith(" host-00")
        table.focus()
        await pilot.press("end")
        await until(
            pilot, lambda: table.render_line(table.size.height - 1).text.startswith(" host-39")
        )
        assert table.render_line(0).text == header  # the header stays on top
        source.finish()


class Answers:
    """A loopback Prometheus stand-in: every query gets the answer set last (real HTTP)."""

    def __init__(self) -> None:
        self.body = b""
        answers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                body = answers.body
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def set(self, answer: object) -> None:
        self.body = json.dumps(answer).encode()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def gpu_answer(
    used_gib: float, total_gib: float = 80, util: str = "0.5", host: str = "a", **labels: str
) -> dict[str, object]:
    def part(name: str, value: str, **more: str) -> dict[str, object]:
        return {
            "metric": {"fleet_q": name, "host": host, "gpu": "0", **more},
            "value": [1_700_000_000.0, value],
        }

    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                part("used", str(used_gib * GiB)),
                part("total", str(total_gib * GiB)),
                part("util", util),
                part("fresh", "1699999999"),
                part("user", str(used_gib * GiB), user=labels.get("user", "carol")),
                part("status", "1", task=labels.get("task", "train.log"), status="running"),
            ],
        },
    }


async def test_the_view_recovers_after_a_malformed_answer() -> None:
    answers = Answers()
    answers.set(gpu_answer(10))
    source = FleetSource(PrometheusClient(answers.url, timeout_s=2.0), interval_s=0.2)
    app = FleetApp(source, source.check())
    try:
        async with app.run_test(size=(200, 20)) as pilot:
            table = app.query_one(FleetTable)
            await until(pilot, lambda: "10.0 / 80.0 GiB" in table.lines()[0])
            answers.set({"status": "success", "data": {"resultType": "vector", "result": 5}})
            await until(pilot, lambda: app.problem is not None)
            assert app.problem == (
                f"Prometheus at {answers.url} gave a malformed answer: "
                "data.result is a number, not a list (showing the last "
                "answer; retrying)"
            )
            assert "10.0 / 80.0 GiB" in table.lines()[0]  # the last answer stays
            answers.set(gpu_answer(30))
            await until(
                pilot, lambda: app.problem is None and "30.0 / 80.0 GiB" in table.lines()[0]
            )
    finally:
        answers.close()


async def test_impossible_figures_show_as_invalid_and_labels_as_text() -> None:
    answers = Answers()
    answers.set(
        gpu_answer(
            -4.7,
            total_gib=-0.0,
            util="3",
            host="\x1b[2Jevil",
            user="[b]\x9b",
            task="t\u202eexe.log",
        )
    )
    source = FleetSource(PrometheusClient(answers.url, timeout_s=2.0), interval_s=0.2)
    app = FleetApp(source, source.check())
    try:
        async with app.run_test(size=(200, 20)) as pilot:
            table = app.query_one(FleetTable)
            await until(pilot, lambda: len(table.lines()) == 1)
            line = table.lines()[0]
            assert line.startswith(" \\x1b[2Jevil")
            assert "[??????????] invalid" in line and "-4.7" not in line and "-0.0" not in line
            assert "300%" not in line and "invalid  invalid  [b]\\x9b invalid" in line
            assert line.endswith("t\\u202eexe.log ok")
            segments = "".join(s.text for y in range(2) for s in table.render_line(y))
            assert "\x1b" not in segments and "\x9b" not in segments
    finally:
        answers.close()


async def test_one_host_is_said_so_and_question_mark_shows_the_fleet_keys() -> None:
    from tui.screens.help import FLEET_KEYS, HelpScreen

    source = ScriptedCollector("prometheus", role="fleet")
    app = FleetApp(source, snapshot(A0), url="http://127.0.0.1:9090")
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: len(app.query_one(FleetTable).lines()) == 1)
        assert "1 host · 1 GPU  " in str(app.query_one("#fleet-title").render())
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen) and help_screen.keys == FLEET_KEYS
        notes = " ".join(str(s.render()) for s in help_screen.query(".help-note"))
        assert "stale" in notes and "Containers" not in notes  # not the dashboard's notes
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        source.finish()

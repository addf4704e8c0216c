"""Pilot tests of the fleet view: rows in order, a failing Prometheus never empties the view."""

from __future__ import annotations

from collectors.base import CollectorError
from gpuherd.fleet.model import FleetRow, FleetSnapshot, FleetTask, sort_key
from tests.app.helpers import ScriptedCollector, until
from tests.fakes import GiB
from tui.fleet_app import FleetApp
from tui.widgets.fleet_table import FleetTable


def snapshot(*rows: FleetRow) -> FleetSnapshot:
    return FleetSnapshot(tuple(sorted(rows, key=sort_key)), 1_700_000_000.0, 0.004)


A0 = FleetRow("a", "0", "gpuherd", "H100", 70 * GiB, 80 * GiB, 0.9, "carol", 60 * GiB,
              (FleetTask("cifar/train.log", "running", ("nan",)),))
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

        source.push(CollectorError("cannot reach Prometheus at http://127.0.0.1:9090: "
                                   "Connection refused"))
        await until(pilot, lambda: app.problem is not None)
        assert app.problem == ("cannot reach Prometheus at http://127.0.0.1:9090: Connection "
                               "refused (showing the last answer; retrying)")
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
    rows = [FleetRow(f"host-{n:02d}", "0", "gpuherd", "NVIDIA H100 80GB HBM3", n * GiB,
                     80 * GiB, 0.5, "carol", GiB, (FleetTask("cifar/train.log", "running"),))
            for n in range(40)]
    source = ScriptedCollector("prometheus", role="fleet")
    app = FleetApp(source, snapshot(*rows), url="http://127.0.0.1:9090")
    async with app.run_test(size=(120, 16)) as pilot:
        table = app.query_one(FleetTable)
        await until(pilot, lambda: len(table.lines()) == 40)
        header = table.render_line(0).text
        assert "MODEL" not in header and "TASKS" in header  # the model gives way below 150
        assert table.lines()[0].startswith(" host-00") and \
            table.lines()[0].endswith("carol 1.0 GiB     cifar/train.log ok")
        assert "H100" not in table.lines()[0]
        assert table.render_line(1).text.startswith(" host-00")
        table.focus()
        await pilot.press("end")
        await until(pilot, lambda: table.render_line(table.size.height - 1).text
                    .startswith(" host-39"))
        assert table.render_line(0).text == header  # the header stays on top
        source.finish()

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


def cells(table: FleetTable) -> list[list[str]]:
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_rows_follow_free_memory_and_a_failing_prometheus_keeps_them() -> None:
    source = ScriptedCollector("prometheus", role="fleet")
    app = FleetApp(source, snapshot(A0, B0), url="http://127.0.0.1:9090")
    async with app.run_test(size=(200, 20)) as pilot:
        table = app.query_one(FleetTable)
        await until(pilot, lambda: table.row_count == 2)
        assert [row[0] for row in cells(table)] == ["b", "a"]  # 70 GiB free before 10 GiB
        assert cells(table)[1][-1] == "cifar/train.log NaN"

        source.push(CollectorError("cannot reach Prometheus at http://127.0.0.1:9090: "
                                   "Connection refused"))
        await until(pilot, lambda: app.problem is not None)
        assert app.problem == ("cannot reach Prometheus at http://127.0.0.1:9090: Connection "
                               "refused (showing the last answer; retrying)")
        assert table.row_count == 2  # the last answer stays

        busy_b = FleetRow("b", "0", "gpuherd", "H100", 79 * GiB, 80 * GiB, 1.0, "dave", 78 * GiB)
        stale_a = FleetRow("a", "0", "gpuherd", "H100", 70 * GiB, 80 * GiB, 0.9, stale=True)
        source.push(snapshot(stale_a, busy_b))
        await until(pilot, lambda: app.problem is None and cells(table)[0][0] == "b")
        assert [row[0] for row in cells(table)] == ["b", "a stale"]
        title = str(app.query_one("#fleet-title").render())
        assert "2 hosts · 2 GPUs · 1 stale" in title
        source.finish()

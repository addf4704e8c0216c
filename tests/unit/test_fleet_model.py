"""The fleet's rows from a Prometheus answer: order, staleness, dcgm units, users and tasks."""

from __future__ import annotations

import pytest

from gpuherd.fleet.model import MIB, FleetRow, FleetTask, build_rows, checked, fleet_query
from gpuherd.fleet.promql import Series
from tests.fakes import GiB

NOW = 1_000_000.0


def s(q: str, value: float, at: float = NOW, **labels: str) -> Series:
    return Series({"fleet_q": q, **labels}, value, at)


def gpuherd_gpu(
    host: str, gpu: str, used: float, total: float, age_s: float | None = 1.0, util: float = 0.5
) -> list[Series]:
    out = [
        s("used", used, host=host, gpu=gpu),
        s("total", total, host=host, gpu=gpu),
        s("util", util, host=host, gpu=gpu),
        s("model", 1.0, host=host, gpu=gpu, model="NVIDIA H100"),
    ]
    if age_s is not None:
        out.append(s("fresh", NOW - age_s, host=host, gpu=gpu))
    return out


def test_rows_are_sorted_by_free_memory_and_stale_hosts_go_last() -> None:
    series = [
        *gpuherd_gpu("a", "0", 70 * GiB, 80 * GiB),  # 10 GiB free
        *gpuherd_gpu("a", "1", 10 * GiB, 80 * GiB),  # 70 GiB free
        *gpuherd_gpu("b", "0", 0, 140 * GiB, age_s=None),  # 140 free, scrape failed
        *gpuherd_gpu("c", "0", 40 * GiB, 80 * GiB),
    ]  # 40 GiB free
    rows, at = build_rows(series, stale_after_s=5.0)
    assert at == NOW
    assert [(r.host, r.gpu, r.stale) for r in rows] == [
        ("a", "1", False),
        ("c", "0", False),
        ("a", "0", False),
        ("b", "0", True),
    ]
    assert rows[0].free_bytes == 70 * GiB and rows[0].model == "NVIDIA H100"
    assert rows[-1].age_s is None


@pytest.mark.parametrize(("age_s", "stale"), [(4.9, False), (5.0, False), (5.1, True)])
def test_a_host_is_stale_once_its_newest_sample_is_older_than_the_threshold(
    age_s: float, stale: bool
) -> None:
    rows, _ = build_rows(gpuherd_gpu("a", "0", GiB, 2 * GiB, age_s=age_s), stale_after_s=5.0)
    assert rows[0].stale is stale
    assert rows[0].age_s == pytest.approx(age_s)


def test_dcgm_exporter_series_in_mib_become_rows_of_their_own() -> None:
    labels = {"Hostname": "dgx-1", "gpu": "3", "UUID": "GPU-d", "modelName": "NVIDIA A100"}
    series = [
        s("dcgm_used", 1024, **labels),
        s("dcgm_free", 39 * 1024, **labels),
        s("dcgm_util", 87, **labels),
        s("dcgm_fresh", NOW - 2, **labels),
        s("dcgm_used", 100, gpu="0", instance="10.0.0.9:9400"),
    ]  # no Hostname label
    rows, _ = build_rows(series, stale_after_s=10.0)
    by_host = {r.host: r for r in rows}
    dgx = by_host["dgx-1"]
    assert (dgx.source, dgx.gpu, dgx.model) == ("dcgm", "3", "NVIDIA A100")
    assert dgx.used_bytes == 1024 * MIB and dgx.total_bytes == 40 * 1024 * MIB
    assert dgx.free_bytes == 39 * GiB and dgx.util_ratio == pytest.approx(0.87)
    assert dgx.stale is False
    other = by_host["10.0.0.9:9400"]
    assert other.total_bytes is None and other.stale is True  # no fresh sample, no free figure
    assert rows[-1] is other


def test_top_user_and_tasks_with_their_health() -> None:
    series = [
        *gpuherd_gpu("a", "0", 50 * GiB, 80 * GiB),
        *gpuherd_gpu("a", "1", 0, 80 * GiB),
        s("user", 30 * GiB, host="a", gpu="0", user="carol"),
        s("user", 12 * GiB, host="a", gpu="0", user="dave"),
        s("status", 1, host="a", task="command", status="running"),
        s("task_gpu", 1, host="a", task="command", gpu="0"),
        s("status", 1, host="a", task="detr/train.log", status="failed"),
        s("finding", 2, host="a", task="detr/train.log", kind="download"),
        s("finding", 1, host="a", task="detr/train.log", kind="nan"),
        s("finding", 1, host="a", task="detr/train.log", kind="stalled"),
    ]
    rows, _ = build_rows(series, stale_after_s=5.0)
    gpu0 = next(r for r in rows if r.gpu == "0")
    gpu1 = next(r for r in rows if r.gpu == "1")
    assert (gpu0.top_user, gpu0.top_user_bytes) == ("carol", 30 * GiB)
    assert gpu1.top_user is None
    # A task whose GPU is unknown shows on its host's first GPU.
    assert gpu0.tasks == (
        FleetTask("command", "running"),
        FleetTask("detr/train.log", "failed", ("nan", "stalled", "download")),
    )
    assert gpu0.tasks[1].severity == "error" and gpu0.tasks[0].severity is None
    assert gpu1.tasks == ()


def test_the_fleet_is_one_query_with_every_part_tagged() -> None:
    query = fleet_query(600)
    assert query.count(" or ") == 12
    assert "last_over_time(gpuherd_gpu_memory_used_bytes[600s])" in query
    assert "last_over_time(DCGM_FI_DEV_FB_FREE[600s])" in query
    assert (
        'label_replace(timestamp(gpuherd_gpu_memory_used_bytes), "fleet_q", "fresh", "", "")'
        in query
    )


@pytest.mark.parametrize(
    ("used", "total", "util", "user_bytes", "invalid"),
    [
        (80.0, 80.0, 1.0, 0.0, set()),  # full and fully busy: possible
        (80.0 + 1e-6, 80.0, 1.0, 0.0, {"memory"}),  # more used than there is
        (0.0, 80.0, 1.0 + 1e-6, 0.0, {"util"}),  # above 100 %
        (0.0, 80.0, -1e-9, 0.0, {"util"}),
        (-4.7, 80.0, 0.5, 0.0, {"memory"}),
        (0.0, 0.0, 0.5, 0.0, {"memory"}),  # a GPU of no memory
        (0.0, -0.0, 0.5, 0.0, {"memory"}),
        (float("nan"), 80.0, 0.5, 0.0, {"memory"}),
        (1.0, float("inf"), 0.5, 0.0, {"memory"}),
        (1.0, 80.0, float("nan"), 0.0, {"util"}),
        (1.0, 80.0, 0.5, -1.0, {"user"}),
        (None, 80.0, None, None, set()),  # merely missing: N/A, not invalid
    ],
)
def test_impossible_figures_are_named_and_never_kept(
    used, total, util, user_bytes, invalid
) -> None:
    row = checked(FleetRow("a", "0", "gpuherd", None, used, total, util, "u", user_bytes))
    assert row.invalid == invalid
    if "memory" in invalid:
        assert row.used_bytes is None and row.total_bytes is None and row.free_bytes is None
    if "util" in invalid:
        assert row.util_ratio is None
    if "user" in invalid:
        assert row.top_user_bytes is None

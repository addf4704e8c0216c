"""`gpuherd replay` of a session with `containers.csv` shows its containers in the dashboard."""

from __future__ import annotations

from pathlib import Path

from collectors.samples import (
    ContainerSample,
    ContainerTick,
    GpuProcess,
    GpuSample,
    GpuTick,
    HostSample,
    ProcessInfo,
)
from gpuherd.common.options import MonitorOptions
from gpuherd.dashboard.monitor import build_plan
from gpuherd.session.session import SessionWriter
from tests.app.helpers import until
from tui.app import make_app
from tui.widgets.container_panel import ContainerPanel, visible_names
from tui.widgets.process_table import ProcessTable

GiB = 1 << 30
T0 = 1_795_000_000.0
TRAINER, ETL = "a" * 64, "b" * 64


def _session(directory: Path) -> None:
    meta = {"host": "box", "driver": "580.159.04", "started_at": T0, "interval_s": 1.0}
    with SessionWriter(directory, meta) as writer:
        for i in range(30):
            t = T0 + i
            writer.write_gpu_tick(
                GpuTick(
                    t,
                    (
                        GpuSample(
                            0,
                            "GPU-0",
                            "NVIDIA H100 80GB HBM3",
                            memory_used_bytes=12 * GiB,
                            memory_total_bytes=80 * GiB,
                            processes=(GpuProcess(4242, 10 * GiB), GpuProcess(5151, GiB)),
                        ),
                    ),
                )
            )
            writer.write_host(
                HostSample(
                    t,
                    processes=(
                        ProcessInfo(
                            4242, user="ana", command="python train.py", container=TRAINER[:12]
                        ),
                        ProcessInfo(5151, user="bo", command="python etl.py", container=ETL[:12]),
                    ),
                )
            )
            writer.write_containers(
                ContainerTick(
                    t + 0.5,
                    (
                        ContainerSample(
                            ETL,
                            ETL[:12],
                            "etl",
                            "busybox:1",
                            "running",
                            cpu_pct=3.0,
                            memory_used_bytes=GiB,
                            memory_limit_bytes=8 * GiB,
                            pids=2,
                        ),
                        ContainerSample(
                            TRAINER,
                            TRAINER[:12],
                            "trainer",
                            "pytorch:24.10",
                            "running",
                            cpu_pct=150.0,
                            memory_used_bytes=6 * GiB,
                            memory_limit_bytes=64 * GiB,
                            pids=40,
                            gpu_devices=("0",),
                        ),
                    ),
                )
            )


async def test_a_replayed_session_shows_its_containers_and_names_them_in_the_process_table(
    tmp_path: Path,
) -> None:
    _session(tmp_path / "s")
    args = MonitorOptions(replay=str(tmp_path / "s"), speed=1.0, interval=1.0)
    plan = build_plan(args)
    assert any(c.name == "replay:containers" for c in plan.collectors)
    app = make_app(
        plan.collectors,
        pid_watch=plan.pid_watch,
        hostname=plan.hostname,
        replay_label=plan.replay_label,
        notices=plan.notices,
    )
    async with app.run_test(size=(180, 50)) as pilot:
        panel = app.screen.query_one(ContainerPanel)
        await until(pilot, lambda: panel.row_count == 2)
        assert panel.has_class("-shown")
        assert sorted(visible_names(panel)) == ["etl", "trainer"]
        table = app.screen.query_one(ProcessTable)
        await until(
            pilot, lambda: {r.pid: r.container for r in table.rows_shown}.get(4242) == "trainer"
        )
        assert {r.pid: r.container for r in table.rows_shown}[5151] == "etl"

"""Panels subscribe by role: sources say what they are, and two of a kind stay two."""

from __future__ import annotations

from collectors.base import CollectorError
from collectors.machine.nvml import NvmlCollector
from collectors.roles import LOG
from tests.app.helpers import T0, ScriptedCollector, collectors_done, host, host_source, until
from tests.fakes import FakeCollector, FakeGpu, FakeNvml, GiB
from tui.app import make_app
from tui.widgets.banner import Banner
from tui.widgets.gpu_panel import GpuPanel

SIZE = (160, 50)
BOX_A = "GPU-aaaaaaaa-1111-0000-0000-000000000000"
BOX_B = "GPU-bbbbbbbb-2222-0000-0000-000000000000"


async def test_two_gpu_sources_both_show_on_the_gpu_panel() -> None:
    first = NvmlCollector(
        backend=FakeNvml([FakeGpu(name="NVIDIA H200", uuid=BOX_A)]), interval_s=0.02, name="nvml-a"
    )
    second = NvmlCollector(
        backend=FakeNvml([FakeGpu(name="NVIDIA A100-SXM4-80GB", uuid=BOX_B, total=80 * GiB)]),
        interval_s=0.02,
        name="nvml-b",
    )
    app = make_app([first, second], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        panel = app.screen.query_one(GpuPanel)
        await until(pilot, lambda: panel.tick is not None and len(panel.tick.devices) == 2)
        assert [g.uuid for g in panel.tick.devices] == [BOX_A, BOX_B] or [
            g.uuid for g in panel.tick.devices
        ] == [BOX_B, BOX_A]
        await until(pilot, lambda: "A100" in panel.plain and "H200" in panel.plain)
        assert "GPU-aaaaaaaa" in panel.plain and "GPU-bbbbbbbb" in panel.plain
        assert set(app.state.history) == {BOX_A, BOX_B}
        assert app.state.sources("gpu") == ["nvml-a", "nvml-b"]


async def test_a_source_named_like_a_gpu_host_with_role_log_marks_the_tasks_panel() -> None:
    log = FakeCollector(
        [CollectorError("permission denied: /runs/a.log")],
        name="gpu-something-host",
        role=LOG,
        task_id="/runs/a.log",
    )
    app = make_app([log], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        await collectors_done(pilot, app)
        tasks = app.screen.query_one("#tasks")
        await until(pilot, lambda: tasks.has_class("-error"))
        assert "permission denied" in (tasks.border_subtitle or "")
        assert not app.screen.query_one("#gpus").has_class("-error")
        assert not app.screen.query_one("#host").has_class("-error")
        assert app.state.tasks.task_ids == ("/runs/a.log",)  # its row says why, too


async def test_failures_of_a_source_without_a_role_go_to_the_banner_until_it_recovers() -> None:
    docker = ScriptedCollector("docker", role=None)
    app = make_app([docker, host_source(host())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        banner = app.screen.query_one(Banner)
        docker.push(CollectorError("docker socket gone"))
        await until(pilot, lambda: "docker: docker socket gone" in str(banner.render()))
        for panel in ("#gpus", "#host", "#tasks"):
            assert not app.screen.query_one(panel).has_class("-error")
        docker.push(object())  # a sample of a type no role table lists
        await until(pilot, lambda: app.state.status["docker"].health == "ok")
        assert "docker" not in str(banner.render())
        assert app.state.role("docker") is None
        docker.finish()
        await collectors_done(pilot, app)

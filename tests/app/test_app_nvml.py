"""The dashboard over the real NVML and host collectors, faked only at the NVML seam."""

from __future__ import annotations

import getpass
import os
import threading

from collectors.machine.host import HostCollector, PidWatch
from collectors.machine.nvml import NvmlCollector, ProcessEntry
from collectors.samples import GpuProcess, HostSample
from gpuherd.engine.gate import EarlyCollectors
from tests.app.helpers import T0, UUID0, ScriptedCollector, gpu, tick, until
from tests.fakes import FakeGpu, FakeNvml, GiB, GpuIsLost, LibraryNotFound, MiB, NotSupported
from tui.app import make_app
from tui.widgets.banner import Banner
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.header_bar import HeaderBar
from tui.widgets.process_table import ProcessTable

H200 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
A100 = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def two_gpus() -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                name="NVIDIA H200",
                uuid=H200,
                used=20 * GiB,
                util=(55, 30),
                compute=[ProcessEntry(pid=31337, used_memory_bytes=19 * GiB)],
            ),
            FakeGpu(name="NVIDIA A100-SXM4-80GB", uuid=A100, total=80 * GiB, used=615 * MiB),
        ]
    )


async def test_real_collector_fills_the_panels_and_names_the_gap() -> None:
    nvml = two_gpus()
    app = make_app([NvmlCollector(backend=nvml, interval_s=0.05)], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.state.gpu_tick is not None)
        text = app.screen.query_one(GpuPanel).plain
        assert "NVIDIA H200" in text and "NVIDIA A100-SXM4-80GB" in text
        assert (
            "GPU-aaaaaaaa" in text
            and "55%" in text
            and "580.159.04" in app.screen.query_one(HeaderBar).plain
        )
        table = app.screen.query_one(ProcessTable)
        await until(pilot, lambda: table.row_count == 1)
        assert table.cell_texts(f"{H200}/31337")["pid"] == "31337"
        note = str(app.screen.query_one("#gap-note").render())
        assert "0.6 GiB on GPU 1 in use by processes not visible here" in note
        assert "on GPU 0" in note  # 1 GiB of GPU 0 belongs to no listed process either


async def test_lost_gpu_from_the_driver_turns_its_row_red_and_the_other_keeps_going() -> None:
    nvml = two_gpus()
    app = make_app([NvmlCollector(backend=nvml, interval_s=0.02)], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.state.gpu_tick is not None)
        nvml.fail(1, "memory_info_v2", GpuIsLost)
        nvml.fail(1, "memory_info", GpuIsLost)
        await until(pilot, lambda: A100 in app.state.gpu_errors)
        nvml.gpus[0].util = (99, 10)
        await until(pilot, lambda: "99%" in app.screen.query_one(GpuPanel).plain)
        text = app.screen.query_one(GpuPanel).plain
        assert "ERROR:" in text
        assert not app.screen.query_one("#gpus").has_class("-error")


async def test_unsupported_fields_read_na_on_screen() -> None:
    nvml = two_gpus()
    nvml.fail(0, "temperature", NotSupported)
    nvml.fail(0, "power", NotSupported)
    app = make_app([NvmlCollector(backend=nvml, interval_s=0.05)], clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.state.gpu_tick is not None)
        first = app.screen.query_one(GpuPanel).plain.splitlines()[0]
        assert "N/A  N/A / 700 W" in first


async def test_missing_driver_shows_the_banner_and_host_figures_keep_coming() -> None:
    nvml = FakeNvml()
    nvml.fail(None, "init", LibraryNotFound)
    watch = PidWatch()
    app = make_app(
        [NvmlCollector(backend=nvml), HostCollector(watch, interval_s=0.05)],
        pid_watch=watch,
        clock=lambda: T0,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: bool(app.state.notices))
        banner = str(app.screen.query_one(Banner).render())
        assert banner.startswith("NVIDIA driver not found")
        assert banner.count("gpuherd --demo") == 1
        await until(pilot, lambda: app.state.host_sample is not None)
        first = app.state.host_sample.taken_at
        await until(pilot, lambda: app.state.host_sample.taken_at > first)
        assert app.screen.query_one("#host").display
        assert not app.screen.query_one("#gpus").display


async def test_a_new_gpu_process_gets_its_user_at_once_not_at_the_next_host_tick() -> None:
    """The first full frame: a GPU tick's new pids wake the host collector early."""
    me = os.getpid()
    gpus = ScriptedCollector("nvml")
    watch = PidWatch()
    host = HostCollector(watch, interval_s=600.0)  # a second host sample only by waking
    app = make_app([gpus, host], pid_watch=watch, clock=lambda: T0)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.state.host_sample is not None)
        assert app.state.host_sample.processes == ()
        gpus.push(tick(gpu(0, processes=(GpuProcess(me, 2 * GiB),))))
        table = app.screen.query_one(ProcessTable)
        await until(pilot, lambda: table.row_count == 1)
        # Long before the scripted GPU source gives up (60 s): the table is redrawn for the
        # host sample itself, not for a later GPU tick.
        await until(
            pilot,
            lambda: getpass.getuser()[:8] in table.cell_texts(f"{UUID0}/{me}")["user"],
            timeout_s=5,
        )
        gpus.finish()


async def test_collectors_started_before_the_app_are_adopted_with_what_they_read() -> None:
    """`gpuherd.dashboard.monitor.run_app` starts the collectors before Textual loads; the app takes
    over their threads and shows what they read from its first frame on."""
    me = os.getpid()
    nvml = FakeNvml(
        [
            FakeGpu(
                name="NVIDIA H200",
                uuid=H200,
                used=3 * GiB,
                compute=[ProcessEntry(pid=me, used_memory_bytes=2 * GiB)],
            )
        ]
    )
    watch = PidWatch()
    collectors = [
        NvmlCollector(backend=nvml, interval_s=600.0),
        HostCollector(watch, interval_s=600.0),
    ]
    detailed = threading.Event()

    def tap(event: object) -> None:
        sample = getattr(event, "sample", None)
        if isinstance(sample, HostSample) and any(p.user for p in sample.processes):
            detailed.set()

    early = EarlyCollectors.start(collectors, tap=tap, pid_watch=watch)
    assert detailed.wait(10)
    app = make_app(collectors, pid_watch=watch, clock=lambda: T0, early=early)
    async with app.run_test(size=(160, 50)) as pilot:
        # Handled on mount, not as messages after it: nothing to wait for.
        assert (
            app.state.gpu_tick is not None and "NVIDIA H200" in app.screen.query_one(GpuPanel).plain
        )
        row = app.screen.query_one(ProcessTable).cell_texts(f"{H200}/{me}")
        assert row["pid"] == str(me) and row["user"] == getpass.getuser()
        assert sorted(app.threads.alive()) == ["host", "nvml"]  # adopted, not started again
        assert nvml.calls[("init", None)] == 1
        await pilot.press("q")
    assert app.threads.alive() == []  # quitting stopped the adopted threads too

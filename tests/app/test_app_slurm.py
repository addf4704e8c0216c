"""The Slurm panel and the process table's job names, fed by scripted Slurm and GPU ticks."""

from __future__ import annotations

from collectors.base import CollectorError
from collectors.roles import HOST, SLURM
from collectors.samples import GpuProcess, ProcessInfo
from collectors.slurm.samples import ProcessJob, SlurmJob, SlurmTick
from collectors.slurm.usage import IdleWatch
from tests.app.helpers import T0, GiB, ScriptedCollector, gpu, host, tick, until
from tui.app import GpuherdApp, make_app
from tui.widgets.banner import Banner
from tui.widgets.process_table import ProcessTable
from tui.widgets.slurm_panel import SlurmPanel

SIZE = (180, 50)

GPUS = tick(
    gpu(0, gpu_util_pct=90.0, memory_used_bytes=30 * GiB, processes=(GpuProcess(4242, 30 * GiB),)),
    gpu(1, gpu_util_pct=0.0, memory_used_bytes=1 * GiB, processes=(GpuProcess(5151, 1 * GiB),)),
    gpu(2, gpu_util_pct=0.0, processes=()),
)


def slurm(t: float = T0) -> SlurmTick:
    return SlurmTick(
        t,
        "gpu01",
        (
            SlurmJob("4711", "ana", "vit-train", "gpu", "RUNNING", 3600, 7200, (0, 1), 2),
            SlurmJob("4800", "bo", "notebook", "gpu", "RUNNING", 60, None, (2,), 1, "4790_3"),
        ),
        (ProcessJob(4242, "4711", "0", "cgroup"), ProcessJob(5151, "4711", "batch", "environ")),
    )


def make(now: list[float] | None = None) -> tuple[GpuherdApp, list[ScriptedCollector]]:
    sources = [
        ScriptedCollector("nvml"),
        ScriptedCollector("host", role=HOST),
        ScriptedCollector("slurm", role=SLURM),
    ]
    clock = now or [T0]
    return make_app(sources, clock=lambda: clock[0], hostname="gpu01"), sources


def cells(panel: SlurmPanel, key: str) -> dict[str, str]:
    names = [str(c.key.value) for c in panel.ordered_columns]
    return dict(zip(names, (t.plain for t in panel.get_row(key)), strict=True))


async def started(pilot, app: GpuherdApp, sources: list[ScriptedCollector]) -> None:
    gpus, hosts, jobs = sources
    hosts.push(host(processes=(ProcessInfo(4242, "ana", "python train.py", 100.0, GiB, T0),)))
    gpus.push(GPUS)
    await until(pilot, lambda: app.state.gpu_tick is not None)
    jobs.push(slurm())
    await until(pilot, lambda: app.screen.query_one(SlurmPanel).row_count == 2)


async def test_the_panel_lists_each_job_with_its_gpus_memory_utilization_and_time_left() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        panel = app.screen.query_one(SlurmPanel)
        assert cells(panel, "4711") == {
            "job": "4711",
            "user": "ana",
            "name": "vit-train",
            "partition": "gpu",
            "state": "RUNNING",
            "gpus": "0,1",
            "vram": "31.0 GiB",
            "util": "45%",
            "left": "1:00:00",
        }
        assert cells(panel, "4800")["job"] == "4790_3"
        assert cells(panel, "4800")["left"] == "N/A"
        assert app.screen.query_one("#slurm").border_title == (
            "Slurm node gpu01: 2 jobs, 3 GPUs allocated"
        )
        await pilot.pause(0.2)
        assert app.screen.query_one("#slurm").region.height == 5  # borders, header, two jobs


async def test_the_process_table_names_each_processs_job_and_filters_by_it() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        table = app.screen.query_one(ProcessTable)
        await until(
            pilot,
            lambda: (
                {r.pid: r.job for r in table.rows_shown}
                == {4242: "job 4711.0", 5151: "job 4711.batch"}
            ),
        )
        await pilot.press("slash", *"4711.0", "enter")
        await until(pilot, lambda: [r.pid for r in table.rows_shown] == [4242])


async def test_a_failing_slurm_is_marked_on_its_panel() -> None:
    app, sources = make()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        sources[2].push(
            CollectorError("slurm_load_jobs error: Unable to contact slurm controller", "slurm")
        )
        box = app.screen.query_one("#slurm")
        await until(pilot, lambda: box.has_class("-error"))


async def test_a_gpu_held_idle_past_the_set_time_is_a_finding_on_the_banner() -> None:
    now = [T0]
    app, sources = make(now)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, sources)
        banner = app.screen.query_one(Banner)
        assert not any("idle" in line for line in banner.lines)
        now[0] = T0 + 29 * 60
        sources[0].push(tick(*GPUS.devices, t=T0 + 29 * 60))
        await until(pilot, lambda: app.state.gpu_tick.taken_at == T0 + 29 * 60)
        await pilot.pause()
        assert not any("idle" in line for line in banner.lines)
        now[0] = T0 + 30 * 60
        sources[0].push(tick(*GPUS.devices, t=T0 + 30 * 60))
        await until(
            pilot,
            lambda: "job 4711 (ana, vit-train) has held GPU 1 idle for 30 min" in banner.lines,
        )


def test_the_idle_watch_needs_the_whole_set_time() -> None:
    watch = IdleWatch(after_s=1800)
    assert watch.update(slurm(), GPUS, T0) == []
    assert watch.update(slurm(), GPUS, T0 + 1799) == []
    found = watch.update(slurm(), GPUS, T0 + 1800)
    # GPU 1 runs a process at 0 %, GPU 2 runs none; GPU 0 is busy.
    assert found == [
        "job 4711 (ana, vit-train) has held GPU 1 idle for 30 min",
        "job 4800 (bo, notebook) has held GPU 2 idle for 30 min",
    ]
    busy = tick(
        gpu(0, gpu_util_pct=90.0),
        gpu(1, gpu_util_pct=5.0, processes=()),
        gpu(2, gpu_util_pct=1.0, processes=(GpuProcess(1, 1),)),
    )
    assert watch.update(slurm(), busy, T0 + 1801) == [
        "job 4711 (ana, vit-train) has held GPU 1 idle for 30 min"
    ]
    assert watch.update(slurm(), GPUS, T0 + 1802) == [
        "job 4711 (ana, vit-train) has held GPU 1 idle for 30 min"
    ], "GPU 2's idle time restarts"

"""`serve-metrics` alone finds who writes each followed log: the task's pid, GPU and status."""

from __future__ import annotations

import os
from pathlib import Path

from collectors.base import CollectorEvent, Sampled
from collectors.logs.logtail import LogTailCollector
from collectors.machine.writers import WriterCollector, WriterWatch
from collectors.samples import GpuProcess, GpuSample, GpuTick, LogBatch
from gpuherd.common.options import ServeMetricsOptions
from gpuherd.engine.running import RunningSet
from gpuherd.export.headless import build_feed
from gpuherd.export.state import ExportState
from tests.fakes import GiB
from tests.unit.test_export_metrics import one, scrape
from tests.unit.test_task_writers import WRITER, start

OTHER_PID = 999_999_998  # a GPU process of a colleague: listed, writes nothing here


def gpus(writer_pid: int | None, at: float) -> Sampled:
    """GPU 0 runs only the colleague's process; GPU 1 also runs the writer, when it lives."""
    on_1 = (GpuProcess(OTHER_PID, GiB),) + (
        (GpuProcess(writer_pid, 3 * GiB),) if writer_pid is not None else ()
    )
    return Sampled(
        "nvml",
        GpuTick(
            at,
            (
                GpuSample(
                    0,
                    "GPU-aaaa",
                    "H100",
                    memory_used_bytes=GiB,
                    memory_total_bytes=80 * GiB,
                    processes=(GpuProcess(OTHER_PID, GiB),),
                ),
                GpuSample(
                    1,
                    "GPU-bbbb",
                    "H100",
                    memory_used_bytes=4 * GiB,
                    memory_total_bytes=80 * GiB,
                    processes=on_1,
                ),
            ),
        ),
    )


def first_batch(log: Path) -> LogBatch:
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    try:
        for _ in range(200):
            batch = tail.sample()
            if batch.metrics:
                return batch
        raise AssertionError("the tail read no metric")
    finally:
        tail.close()


def test_the_running_set_tells_the_watch_and_the_exported_task_follows_its_writer(
    tmp_path: Path, procs
) -> None:  # noqa: F811
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    proc, _ = start(WRITER, str(log), "a")
    procs.append(proc)
    watch = WriterWatch()
    state = ExportState("box-1")
    running = RunningSet(writers=watch)  # the sources' wiring, as serve-metrics runs them

    def emit(event: CollectorEvent) -> None:
        state.emit(running.wire(event))

    batch = first_batch(log)
    emit(Sampled(f"log:{batch.path}", batch))
    emit(gpus(proc.pid, 100.0))
    files, gpu_pids = watch.get()
    assert files == {batch.path: os.path.realpath(log)}
    assert gpu_pids == {OTHER_PID, proc.pid}

    writers = WriterCollector(watch, scan_every_s=3600)  # after the first: liveness only
    emit(Sampled("writers", writers.sample()))
    emit(gpus(proc.pid, 100.5))  # the next tick places the task's pid on its GPU
    [view] = state.snapshot().tasks
    assert (view.status, view.pids, view.writer_pids) == ("running", (proc.pid,), (proc.pid,))
    assert view.gpu_uuids == ("GPU-bbbb",)  # the second GPU, where the writer runs
    found = scrape(state)
    assert one(found, "gpuherd_task_status", status="running") == 1.0

    proc.kill()
    proc.wait()
    emit(gpus(None, 101.0))
    emit(Sampled("writers", writers.sample()))
    [view] = state.snapshot().tasks
    assert view.status == "finished" and view.pids == (proc.pid,) and view.writer_pids == ()
    found = scrape(state)
    assert one(found, "gpuherd_task_status", status="finished") == 1.0
    assert one(found, "gpuherd_task_status", status="running") == 0.0


def test_a_live_feed_with_logs_runs_the_writer_collector_and_a_replay_does_not(
    tmp_path: Path,
) -> None:
    args = ServeMetricsOptions(listen="9400", interval=1.0, log=[str(tmp_path / "train.log")])
    feed = build_feed(args)
    try:
        found = [c for c in feed.collectors if isinstance(c, WriterCollector)]
        assert len(found) == 1 and found[0].watch is feed.writers
    finally:
        assert feed.sources is not None
        feed.sources.close()
    bare = build_feed(ServeMetricsOptions(listen="9400", interval=1.0))
    try:
        assert feed.writers is not None and bare.writers is None
        assert not any(isinstance(c, WriterCollector) for c in bare.collectors)
    finally:
        assert bare.sources is not None
        bare.sources.close()

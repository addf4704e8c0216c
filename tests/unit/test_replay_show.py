"""What a replay shows: sources at their recorded time, the CUDA version, the closing row."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from collectors.base import Sampled
from collectors.loop import run_collector
from collectors.replay.replay import SessionReplay
from collectors.samples import GpuProcess, GpuSample, GpuTick
from collectors.session.session_format import METRICS_COLUMNS
from gpuherd.session.session import SessionWriter
from tests.unit.test_replay import FakeClock, simulate, write_session
from tui.views import gap_note

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"
GIB = 1 << 30


def test_a_log_whose_first_metric_came_a_minute_in_is_not_shown_at_the_start(
    tmp_path: Path,
) -> None:
    path = write_session(tmp_path / "s", [1000.0 + n for n in range(3)], gpus=1)
    rows = [
        f"{1060.0 + n},/runs/a/train.log,{n + 1},train/loss,{2 - n / 10},{59 + n},"
        for n in range(2)
    ]
    (path / "metrics.csv").write_text(",".join(METRICS_COLUMNS) + "\n" + "\n".join(rows) + "\n")
    clock = FakeClock()
    replay = SessionReplay(path, speed=2.0, clock=clock)
    shown = simulate(replay.collectors(), clock)
    assert [(at, name) for at, name, _ in shown if name == "replay:metrics"] == [
        (30.0, "replay:metrics"),
        (30.5, "replay:metrics"),
    ]
    assert [at for at, name, _ in shown if name == "replay:gpu"] == [0.0, 0.5, 1.0]


def test_run_collector_waits_for_the_first_sample_and_a_stop_ends_the_wait(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s", [1000.0, 1001.0], gpus=1)
    (path / "metrics.csv").write_text(
        ",".join(METRICS_COLUMNS) + "\n4600.0,/runs/a/train.log,1,train/loss,2.0,59,\n"
    )
    replay = SessionReplay(path)  # the metric is due an hour after the start
    gpus, metrics = replay.gpu_collector(), replay.metrics_collector()
    assert metrics is not None
    got: list[object] = []
    stop = threading.Event()
    gpu_thread = threading.Thread(target=run_collector, args=(gpus, got.append, stop))
    metrics_thread = threading.Thread(target=run_collector, args=(metrics, got.append, stop))
    gpu_thread.start()
    metrics_thread.start()
    gpu_thread.join(10)  # the GPU rows end: the metrics source still waits for its hour
    assert metrics_thread.is_alive()
    assert [e.source for e in got if isinstance(e, Sampled)] == ["replay:gpu", "replay:gpu"]
    stop.set()
    metrics_thread.join(10)
    assert not metrics_thread.is_alive()


def test_the_driver_integer_reads_as_a_cuda_version(tmp_path: Path) -> None:
    tick = next(SessionReplay(SESSIONS / "tasks").session.gpu_ticks())  # meta says 13000
    assert tick.cuda_driver_version == "13.0"
    path = write_session(tmp_path / "s", [1000.0], gpus=1)
    meta = json.loads((path / "meta.json").read_text())
    for stored, shown in (("12040", "12.4"), ("13.0", "13.0"), (12080, "12.8")):
        (path / "meta.json").write_text(json.dumps({**meta, "cuda_driver_version": stored}))
        assert next(SessionReplay(path).session.gpu_ticks()).cuda_driver_version == shown


def full(t: float, used: float) -> GpuTick:
    gpu = GpuSample(
        0,
        "GPU-0",
        "NVIDIA H200",
        memory_used_bytes=int(used * GIB),
        memory_total_bytes=140 * GIB,
        gpu_util_pct=97.0,
        mem_util_pct=40.0,
        temperature_c=61.0,
        power_w=512.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        processes=(GpuProcess(4242, int((used - 0.5) * GIB)),),
    )
    return GpuTick(t, (gpu,), "580.159.04", "13.580.159.04", "13000")


def test_the_closing_memory_only_row_keeps_the_gpus_other_readings(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", {"host": "box", "started_at": 1000.0}) as writer:
        for n in range(3):
            writer.write_gpu_tick(full(1000.0 + n, 40.0 + n))
        # what `PeakTracker.final_tick` writes when a recording ends: the last fast reading
        closing = GpuSample(
            0, "GPU-0", "NVIDIA H200", memory_used_bytes=45 * GIB, memory_total_bytes=140 * GIB
        )
        writer.write_gpu_tick(GpuTick(1002.4, (closing,), "580.159.04"), {"GPU-0": 45 * GIB})
    replay = SessionReplay(tmp_path / "s", speed=1e6)
    got: list[object] = []
    run_collector(replay.gpu_collector(), got.append, threading.Event())
    ticks = [e.sample for e in got if isinstance(e, Sampled)]
    assert [t.taken_at for t in ticks] == [1000.0, 1001.0, 1002.0, 1002.4]
    last, before = ticks[-1].devices[0], ticks[-2].devices[0]
    assert last.memory_used_bytes == 45 * GIB  # its own reading
    assert (last.temperature_c, last.power_w, last.gpu_util_pct, last.sm_clock_mhz) == (
        61.0,
        512.0,
        97.0,
        1980,
    )
    assert last.processes == before.processes
    assert "would not list" not in gap_note(ticks[-1], True).plain

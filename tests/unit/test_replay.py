"""Replaying session directories: timing on a shared clock, looping, bad lines, streaming."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import pytest

from collectors.base import Finished, Sampled, SourceExhausted, Unavailable
from collectors.loop import run_collector
from collectors.replay.replay import ReplayError, SessionFormatError, SessionReplay
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample
from gpuherd.session.session import SessionWriter

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"
META = {"host": "box", "driver": "580.159.04", "started_at": 1000.0, "interval_s": 1.0}


def gpu_tick(t: float, gpus: int = 2, procs: int = 1) -> GpuTick:
    devices = tuple(
        GpuSample(
            i,
            f"GPU-{i}",
            "NVIDIA H100",
            memory_used_bytes=int(t) * 1000 + i,
            memory_total_bytes=80 << 30,
            gpu_util_pct=float(i),
            temperature_c=40.0,
            processes=tuple(GpuProcess(100 * i + k, 1 << 20) for k in range(procs)),
        )
        for i in range(gpus)
    )
    return GpuTick(t, devices, "580.159.04")


def host_sample(t: float) -> HostSample:
    return HostSample(t, cpu_pct=t - 1000, mem_used_bytes=1, mem_total_bytes=2)


def write_session(path: Path, gpu_ts, host_ts=(), gpus: int = 2, procs: int = 1) -> Path:
    with SessionWriter(path, META) as writer:
        events = [(t, "gpu") for t in gpu_ts] + [(t, "host") for t in host_ts]
        for t, kind in sorted(events):
            if kind == "gpu":
                writer.write_gpu_tick(gpu_tick(t, gpus, procs))
            else:
                writer.write_host(host_sample(t))
    return path


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(collectors, clock: FakeClock, limit: int = 100):
    """Drive collectors exactly as `run_collector` schedules them, on one fake clock.

    Returns (clock time, collector name, taken_at) per sample, in the order they were emitted.
    """
    for c in collectors:
        c.open()
    next_call = {c: c.start_delay_s for c in collectors}
    out = []
    while next_call and len(out) < limit:
        collector = min(next_call, key=next_call.get)
        clock.now = max(clock.now, next_call[collector])
        started = clock.now
        try:
            sample = collector.sample()
        except SourceExhausted:
            del next_call[collector]
            continue
        out.append((round(clock.now, 9), collector.name, sample.taken_at))
        next_call[collector] = max(clock.now, started + collector.interval_s)
    for c in collectors:
        c.close()
    return out


def test_gpu_and_host_keep_recorded_timing_on_a_shared_clock(tmp_path):
    path = write_session(tmp_path / "s", [1000.0, 1001.0, 1002.0, 1003.0], [1000.4, 1002.4])
    clock = FakeClock()
    replay = SessionReplay(path, speed=2.0, clock=clock)
    shown = simulate(replay.collectors(), clock)
    # every sample comes at its recorded offset, each collector's first one too
    assert shown == [
        (0.0, "replay:gpu", 1000.0),
        (0.2, "replay:host", 1000.4),
        (0.5, "replay:gpu", 1001.0),
        (1.0, "replay:gpu", 1002.0),
        (1.2, "replay:host", 1002.4),
        (1.5, "replay:gpu", 1003.0),
    ]


def test_loop_starts_again_with_time_moving_on(tmp_path):
    path = write_session(tmp_path / "s", [1000.0, 1001.0, 1002.0])
    clock = FakeClock()
    replay = SessionReplay(path, loop=True, clock=clock)
    assert replay.host_collector() is None
    shown = simulate([replay.gpu_collector()], clock, limit=7)
    assert [s[2] for s in shown] == [1000.0 + n for n in range(7)]
    assert [s[0] for s in shown] == [float(n) for n in range(7)]


def test_real_threads_deliver_everything_then_finish(tmp_path):
    ticks = [1000.0 + n for n in range(5)]
    hosts = [1000.5 + n for n in range(5)]
    path = write_session(tmp_path / "s", ticks, hosts)
    replay = SessionReplay(path, speed=1e6)
    events: list = []
    threads = [
        threading.Thread(target=run_collector, args=(c, events.append, threading.Event()))
        for c in replay.collectors()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    by_source = {}
    for event in events:
        by_source.setdefault(event.source, []).append(event)
    gpu, host = by_source["replay:gpu"], by_source["replay:host"]
    assert [e.sample for e in gpu[:-1]] == [gpu_tick(t) for t in ticks]
    assert [e.sample for e in host[:-1]] == [host_sample(t) for t in hosts]
    assert isinstance(gpu[-1], Finished) and isinstance(host[-1], Finished)


def test_a_bad_cell_mid_way_is_told_once_with_its_line_and_the_replay_goes_on(tmp_path):
    path = write_session(tmp_path / "s", [1000.0 + n for n in range(4)])
    lines = (path / "gpu.csv").read_text().splitlines(keepends=True)
    lines[4] = lines[4].replace(",40.0,", ",hot,", 1)
    (path / "gpu.csv").write_text("".join(lines))
    replay = SessionReplay(path, speed=1e6)  # head and tail are fine: accepted
    events: list = []
    run_collector(replay.gpu_collector(), events.append, threading.Event())
    assert [type(e).__name__ for e in events] == [
        "Sampled",
        "Failed",
        "Recovered",
        "Sampled",
        "Sampled",
        "Sampled",
        "Finished",
    ]
    assert events[1].error.msg == (f"{path}/gpu.csv:5: temp_c: 'hot' is not a number; read as N/A")
    shown = [e.sample for e in events if isinstance(e, Sampled)]
    assert [t.taken_at for t in shown] == [1000.0, 1001.0, 1002.0, 1003.0]
    assert shown[1].devices[1].temperature_c is None and shown[1].devices[0].temperature_c == 40
    assert SessionReplay(path, check_all=True).warnings == [
        f"{path}/gpu.csv: 1 bad cell read as N/A (first: line 5, temp_c: 'hot' is not a number)"
    ]


def test_a_skipped_row_is_told_once_however_often_a_replay_loops(tmp_path):
    path = write_session(tmp_path / "s", [1000.0, 1001.0, 1002.0, 1003.0], gpus=1)
    lines = (path / "gpu.csv").read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace("1002.0,", "inf,", 1)
    (path / "gpu.csv").write_text("".join(lines))
    replay = SessionReplay(path, speed=1e6, loop=True)
    assert replay.warnings == []  # met while replaying, not before
    events: list = []
    stop = threading.Event()

    def emit(event):
        events.append(event)
        if len(events) >= 8:
            stop.set()

    run_collector(replay.gpu_collector(), emit, stop)
    assert [type(e).__name__ for e in events] == [
        "Sampled",
        "Failed",
        "Recovered",
        "Sampled",
        "Sampled",
        "Sampled",
        "Sampled",
        "Sampled",
    ]
    assert events[1].error.msg == f"{path}/gpu.csv:4: skipped: t: 'inf' is not a finite number"
    # laps are 4 s long (first to last t, plus one interval): the second starts at 1004
    assert [e.sample.taken_at for e in events if isinstance(e, Sampled)] == [
        1000.0,
        1001.0,
        1003.0,
        1004.0,
        1005.0,
        1007.0,
    ]


@pytest.mark.parametrize("speed", [1e-300, 1e-7, 0.0, -1.0, float("nan")])
def test_a_speed_too_slow_to_show_anything_is_refused(speed):
    with pytest.raises(ReplayError, match="too slow to show anything; use 1e-06 or more"):
        SessionReplay(SESSIONS / "handmade", speed=speed)


def test_the_slowest_speed_waits_at_most_a_day_between_samples():
    clock = FakeClock()
    collector = SessionReplay(SESSIONS / "handmade", speed=1e-6, clock=clock).gpu_collector()
    collector.open()
    assert collector.sample().taken_at == 1764130000.0
    assert collector.interval_s == 86400.0  # 1 s recorded / 1e-6 would be 11.6 days
    collector.close()


def test_unusable_directory_fails_before_any_collector_runs():
    with pytest.raises(SessionFormatError, match=r"no meta\.json in it"):
        SessionReplay(SESSIONS / "no_meta")
    with pytest.raises(SessionFormatError, match=r"meta\.json:2: not valid JSON"):
        SessionReplay(SESSIONS / "bad_meta")


def test_truncated_session_warns_at_once_and_replays_up_to_the_cut():
    clock = FakeClock()
    replay = SessionReplay(SESSIONS / "truncated_last_line", speed=100.0, clock=clock)
    assert any("gpu.csv: dropped the last line" in w for w in replay.warnings)
    shown = simulate([replay.gpu_collector()], clock)
    assert [s[2] for s in shown] == [1764130000.0, 1764130001.0, 1764130002.0]


def test_a_session_without_gpu_readings_says_so_at_once(tmp_path):
    # not "waiting for the first GPU reading" for ever: the GPU source is unavailable, and why
    path = write_session(tmp_path / "s", [])
    events: list = []
    run_collector(SessionReplay(path).gpu_collector(), events.append, threading.Event())
    assert [type(e) for e in events] == [Unavailable]
    assert events[0].error.msg == "this session holds no GPU readings"


def test_replay_streams_instead_of_loading_the_session(tmp_path):
    path = write_session(tmp_path / "s", [1000.0 + n for n in range(1000)], gpus=8, procs=2)
    clock = FakeClock()
    collector = SessionReplay(path, speed=1e9, clock=clock).gpu_collector()
    tracemalloc.start()
    try:
        collector.open()
        count = 0
        while True:
            try:
                collector.sample()
            except SourceExhausted:
                break
            count += 1
        collector.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1000
    # the 1000 ticks of 8 GPUs held at once take about 7 MB (tracemalloc, measured: enough to
    # catch a reader that loads the session whole, at a third of the time traced); streaming
    # holds one or two ticks (about 0.05 MB)
    assert peak < 4_000_000

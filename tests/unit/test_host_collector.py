from __future__ import annotations

import getpass
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from collectors.base import Sampled
from collectors.loop import run_collector
from collectors.machine.host import (
    HostCollector,
    HostCounters,
    PidWatch,
    busy_pct,
    compute_rates,
    counter_rate,
    gpu_pids,
    in_host_pid_namespace,
    nic_counted,
    parse_container_id,
    process_cpu_pct,
    read_container_id,
)
from collectors.samples import GpuProcess, GpuSample, GpuTick

ID = "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"


@pytest.fixture
def children():
    procs: list[subprocess.Popen] = []

    def spawn(*argv: str) -> subprocess.Popen:
        proc = subprocess.Popen(list(argv))
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def collector_for(*pids: int, proc_root: str | Path = "/proc") -> HostCollector:
    collector = HostCollector(pids=PidWatch(pids), proc_root=proc_root)
    collector.open()
    return collector


# Pure functions.


def test_counter_rate():
    assert counter_rate(100, 300, 2.0) == 100.0
    assert counter_rate(None, 300, 2.0) is None
    assert counter_rate(300, 100, 2.0) is None  # counter reset
    assert counter_rate(100, 300, 0.0) is None


def test_busy_pct_and_process_cpu_pct():
    assert busy_pct(10.0, 100.0, 40.0, 160.0) == 50.0
    assert busy_pct(None, 100.0, 40.0, 160.0) is None
    assert busy_pct(10.0, 100.0, 40.0, 100.0) is None
    assert process_cpu_pct(1.0, 3.0, 1.0) == 200.0  # two busy threads
    assert process_cpu_pct(None, 3.0, 1.0) is None


def test_rates_are_none_on_first_sample_then_computed():
    first = HostCounters(
        at_s=10.0,
        cpu_busy_s=5.0,
        cpu_total_s=50.0,
        disk_read_bytes=1000,
        disk_write_bytes=0,
        net_rx_bytes=0,
        net_tx_bytes=None,
    )
    second = HostCounters(
        at_s=12.0,
        cpu_busy_s=15.0,
        cpu_total_s=70.0,
        disk_read_bytes=5000,
        disk_write_bytes=4096,
        net_rx_bytes=2048,
        net_tx_bytes=10,
    )
    none = compute_rates(None, first)
    assert (none.cpu_pct, none.disk_read_bytes_s, none.net_rx_bytes_s) == (None, None, None)
    rates = compute_rates(first, second)
    assert rates.cpu_pct == 50.0
    assert rates.disk_read_bytes_s == 2000.0
    assert rates.disk_write_bytes_s == 2048.0
    assert rates.net_rx_bytes_s == 1024.0
    assert rates.net_tx_bytes_s is None


def test_virtual_interfaces_are_not_counted():
    assert nic_counted("eth0") and nic_counted("enp3s0") and nic_counted("ib0")
    assert not any(nic_counted(n) for n in ("lo", "docker0", "veth12ab", "br-1f2e", "ifb0"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"0::/system.slice/docker-{ID}.scope\n", ID[:12]),
        (f"12:memory:/docker/{ID}\n11:cpu:/docker/{ID}\n", ID[:12]),
        (
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c4d.slice/"
            f"cri-containerd-{ID}.scope\n",
            ID[:12],
        ),
        (f"4:pids:/kubepods/burstable/pod1a2b3c4d-0000-1111-2222-333344445555/{ID}\n", ID[:12]),
        (f"0::/machine.slice/libpod-{ID}.scope/container\n", ID[:12]),
        (
            f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope\n",
            ID[:12],
        ),
        (f"0::/machine.slice/libpod-conmon-{ID}.scope\n", None),
        (f"0::/system.slice/crio-{ID}.scope\n", ID[:12]),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/\n", None),
        ("4:memory:/process_api/0bdb916ceba618d1db26cf32e84e3d37\n", None),
        ("", None),
    ],
)
def test_parse_container_id(text, expected):
    assert parse_container_id(text) == expected


def test_read_container_id_from_injected_root(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    assert read_container_id(4242, tmp_path) == ID[:12]
    assert read_container_id(4343, tmp_path) is None


def test_pid_namespace_detection(tmp_path):
    (tmp_path / "self").mkdir()
    status = tmp_path / "self" / "status"
    status.write_text("Name:\tpython\nNSpid:\t7240\n")
    assert in_host_pid_namespace(tmp_path)
    status.write_text("Name:\tpython\nNSpid:\t981234\t17\n")
    assert not in_host_pid_namespace(tmp_path)
    status.write_text("Name:\tpython\n")
    assert in_host_pid_namespace(tmp_path)


# PidWatch.


def test_pid_watch_from_tick_and_threads():
    tick = GpuTick(
        0.0,
        (
            GpuSample(0, "GPU-a", "x", processes=(GpuProcess(1, 10), GpuProcess(2, 10))),
            GpuSample(1, "GPU-b", "x", processes=None),
            GpuSample(2, "GPU-c", "x", processes=(GpuProcess(2, 5), GpuProcess(3, None))),
        ),
    )
    assert gpu_pids(tick) == {1, 2, 3}
    watch = PidWatch()
    assert watch.get() == frozenset()
    watch.set_from_tick(tick)
    assert watch.get() == {1, 2, 3}
    seen: list[frozenset[int]] = []

    def writer():
        for i in range(2000):
            watch.set(range(i % 7))

    def reader():
        for _ in range(2000):
            seen.append(watch.get())

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s == frozenset(range(len(s))) for s in seen)


# Real psutil, real processes.


def test_host_figures_are_sane_and_rates_need_two_samples():
    collector = collector_for()
    first = collector.sample()
    assert first.cpu_pct is None and first.disk_read_bytes_s is None
    assert first.net_rx_bytes_s is None
    assert first.mem_total_bytes == psutil.virtual_memory().total
    assert 0 < first.mem_used_bytes <= first.mem_total_bytes
    assert first.cpu_count == os.cpu_count()
    assert first.load_1m is not None and first.load_1m >= 0
    assert first.processes == ()
    time.sleep(0.2)
    second = collector.sample()
    assert second.cpu_pct is not None and 0.0 <= second.cpu_pct <= 100.0
    if psutil.disk_io_counters() is not None:
        assert second.disk_read_bytes_s is not None and second.disk_read_bytes_s >= 0


def test_watched_process_details(children):
    child = children("sleep", "30")
    # Right after fork the child has no command line until exec; on a loaded machine the first
    # sample can land in that gap (and then rightly shows "[sleep]"-style fallbacks).
    deadline = time.monotonic() + 30
    while not psutil.Process(child.pid).cmdline() and time.monotonic() < deadline:
        time.sleep(0.01)
    collector = collector_for(child.pid)
    first = collector.sample()
    (info,) = first.processes
    assert info.pid == child.pid
    assert info.command == "sleep 30"
    assert info.user == getpass.getuser()
    assert info.rss_bytes is not None and info.rss_bytes > 0
    assert info.started_at is not None and abs(info.started_at - time.time()) < 60
    assert info.cpu_pct is None  # needs a second reading
    time.sleep(0.1)
    (info,) = collector.sample().processes
    assert info.cpu_pct is not None and info.cpu_pct < 50


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def test_busy_process_cpu_pct(children):
    # Many tests share the machine, so a spinning child may get any share of a core over a
    # fixed sleep. Instead, wait until it has used a known amount of CPU (however long that
    # takes), and bracket both samples with psutil's own readings: the collector's figure must
    # lie between the lowest and highest CPU % those readings allow.
    busy = children(sys.executable, "-c", "while True: pass")
    idle = children("sleep", "60")
    proc = psutil.Process(busy.pid)
    collector = collector_for(busy.pid, idle.pid)
    cpu_0, wall_0 = _cpu_s(proc), time.monotonic()
    collector.sample()
    cpu_0b, wall_0b = _cpu_s(proc), time.monotonic()
    deadline = time.monotonic() + 120
    while _cpu_s(proc) < cpu_0b + 0.3:
        assert time.monotonic() < deadline, "the busy child got no CPU for two minutes"
        time.sleep(0.05)
    cpu_1, wall_1 = _cpu_s(proc), time.monotonic()
    infos = {info.pid: info for info in collector.sample().processes}
    cpu_2, wall_2 = _cpu_s(proc), time.monotonic()
    lowest = 100 * (cpu_1 - cpu_0b) / (wall_2 - wall_0)
    highest = 100 * (cpu_2 - cpu_0) / (wall_1 - wall_0b)
    busy_pct, idle_pct = infos[busy.pid].cpu_pct, infos[idle.pid].cpu_pct
    assert busy_pct is not None and idle_pct is not None
    assert lowest * (1 - 1e-9) <= busy_pct <= highest * (1 + 1e-9)
    assert idle_pct < busy_pct  # over the same window


def test_killed_process_is_dropped(children):
    alive = children("sleep", "30")
    doomed = children("sleep", "30")
    collector = collector_for(alive.pid, doomed.pid)
    assert {p.pid for p in collector.sample().processes} == {alive.pid, doomed.pid}
    doomed.kill()
    doomed.wait()
    assert [p.pid for p in collector.sample().processes] == [alive.pid]
    assert collector.tracked_pids == {alive.pid}


def test_unwatched_pid_is_forgotten(children):
    child = children("sleep", "30")
    collector = collector_for(child.pid)
    collector.sample()
    collector.pids.set([])
    assert collector.sample().processes == ()
    assert collector.tracked_pids == frozenset()


def test_process_vanishing_mid_query_is_dropped(children, monkeypatch):
    child = children("sleep", "30")
    collector = collector_for(child.pid)
    collector.sample()
    real_cmdline = psutil.Process.cmdline

    def exit_then_read(self):
        child.kill()
        child.wait()
        return real_cmdline(self)

    monkeypatch.setattr(psutil.Process, "cmdline", exit_then_read)
    assert collector.sample().processes == ()
    assert collector.tracked_pids == frozenset()


def test_zombie_keeps_what_can_be_read(children):
    child = children("sleep", "30")
    child.kill()
    deadline = time.time() + 5
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.time() < deadline:
        time.sleep(0.01)
    (info,) = collector_for(child.pid).sample().processes
    assert info.command == "[sleep]"
    assert info.user == getpass.getuser()


def test_access_denied_fields_are_none(children, monkeypatch):
    child = children("sleep", "30")

    def denied(self):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "cmdline", denied)
    monkeypatch.setattr(psutil.Process, "name", denied)
    monkeypatch.setattr(psutil.Process, "username", denied)
    (info,) = collector_for(child.pid).sample().processes
    assert info.command is None and info.user is None
    assert info.rss_bytes is not None and info.rss_bytes > 0


def test_nonexistent_pid_is_skipped():
    pid = 2**22 + 12345  # above Linux's pid_max ceiling, never a live process
    assert collector_for(pid).sample().processes == ()


def test_container_from_injected_proc_root(children, tmp_path):
    child = children("sleep", "30")
    (tmp_path / str(child.pid)).mkdir()
    (tmp_path / str(child.pid) / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("NSpid:\t1\n")
    (info,) = collector_for(child.pid, proc_root=tmp_path).sample().processes
    assert info.container == ID[:12]
    (info,) = collector_for(child.pid).sample().processes
    assert info.container is None


def test_own_pid_namespace_hides_gpu_pids(children, tmp_path):
    child = children("sleep", "30")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("NSpid:\t981234\t17\n")
    collector = collector_for(child.pid, proc_root=tmp_path)
    assert collector.pids_visible is False
    assert collector.sample().processes == ()


def test_runs_in_the_collector_loop():
    # The first sample has no rate; a later one has. Not necessarily the second: two readings of
    # /proc/stat within one clock tick (a loaded machine, a late sample shortening the wait)
    # show no CPU time passed, which is no rate either (`busy_pct`).
    collector = HostCollector(interval_s=0.02)
    events = []
    stop = threading.Event()

    def emit(event):
        events.append(event)
        if len(events) == 50 or (len(events) > 1 and event.sample.cpu_pct is not None):
            stop.set()

    run_collector(collector, emit, stop)
    assert all(isinstance(e, Sampled) for e in events)
    assert events[0].sample.cpu_pct is None and events[-1].sample.cpu_pct is not None


def test_pid_watch_signals_only_new_pids():
    watch = PidWatch([1, 2])
    collector = HostCollector(pids=watch)
    assert collector.wakeup is watch.grew and not watch.grew.is_set()
    watch.set([2])  # a process left: nothing new to look up
    watch.set([2])
    assert not watch.grew.is_set()
    watch.set([2, 9])
    assert watch.grew.is_set()
    watch.grew.clear()
    collector.wake()
    assert watch.grew.is_set()

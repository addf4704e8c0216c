"""`containers.csv`: written with each container's GPU memory, read back, replayed, recorded."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.base import Sampled
from collectors.machine.container_gpu import container_label, container_names, gpu_use_by_container
from collectors.replay.replay import SessionReplay
from collectors.roles import CONTAINERS
from collectors.samples import (
    ContainerSample,
    ContainerTick,
    GpuProcess,
    GpuSample,
    GpuTick,
    HostSample,
    ProcessInfo,
)
from collectors.session.session_format import CONTAINER_COLUMNS
from gpuherd.record.recorder import Recorder
from gpuherd.session.session import SessionWriter, load_session

GiB = 1 << 30
META = {"host": "box", "driver": "580.159.04", "started_at": 1000.0, "interval_s": 1.0}
A, B = "a" * 64, "b" * 64


def box(cid: str, name: str, **values) -> ContainerSample:
    return ContainerSample(
        id=cid, short_id=cid[:12], name=name, image="busybox:1", status="running", **values
    )


def gpu_tick(t: float) -> GpuTick:
    return GpuTick(
        t,
        (
            GpuSample(
                0, "GPU-0", "H100", processes=(GpuProcess(100, 5 * GiB), GpuProcess(300, GiB))
            ),
            GpuSample(
                1, "GPU-1", "H100", processes=(GpuProcess(100, 2 * GiB), GpuProcess(101, 3 * GiB))
            ),
            GpuSample(2, "GPU-2", "H100", processes=None),
        ),
    )


def host(t: float) -> HostSample:
    return HostSample(
        t,
        processes=(
            ProcessInfo(100, container=A[:12]),
            ProcessInfo(101, container=A[:12]),
            ProcessInfo(300),
        ),
    )  # on a GPU, in no container


def rows(path: Path) -> list[dict[str, str]]:
    with open(path / "containers.csv", newline="") as f:
        return list(csv.DictReader(f))


def full(t: float) -> ContainerTick:
    return ContainerTick(
        t,
        (
            box(
                A,
                "trainer",
                started_at=900.25,
                cpu_pct=101.5,
                memory_used_bytes=3 * GiB,
                memory_limit_bytes=64 * GiB,
                net_rx_bytes_per_s=10.5,
                net_tx_bytes_per_s=0.0,
                block_read_bytes_per_s=4096.0,
                block_write_bytes_per_s=None,
                pids=57,
                gpu_devices=("0", "GPU-1a2b"),
            ),
            box(B, "db", cpu_pct=0.25, memory_used_bytes=GiB, memory_limit_bytes=64 * GiB),
        ),
        engine="Docker 28.2.2",
    )


def test_the_join_sums_a_containers_processes_over_every_gpu() -> None:
    uses = gpu_use_by_container(gpu_tick(1000.0), host(1000.0).processes)
    assert set(uses) == {A[:12]}  # pid 300 runs in no container
    assert uses[A[:12]].memory_bytes == 10 * GiB  # 5 + 2 (pid 100 on two GPUs) + 3
    assert uses[A[:12]].pids == (100, 101) and uses[A[:12]].gpus == (0, 1)
    unknown = GpuTick(1.0, (GpuSample(0, "GPU-0", "H100", processes=(GpuProcess(100, None),)),))
    assert gpu_use_by_container(unknown, host(1.0).processes)[A[:12]].memory_bytes is None
    assert gpu_use_by_container(None, host(1.0).processes) == {}
    names = container_names(full(1.0))
    assert names == {A[:12]: "trainer", B[:12]: "db"}
    assert container_label(A[:12], names) == "trainer"
    assert container_label("c" * 12, names) == "c" * 12  # not the engine's: its id
    assert container_label(None, names) is None


def test_written_rows_carry_each_containers_gpu_memory(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_containers(full(999.5))  # before any GPU tick: not known
        writer.write_gpu_tick(gpu_tick(1000.0))
        writer.write_host(host(1000.2))
        writer.write_containers(full(1000.5))
        writer.write_containers(ContainerTick(1001.5, ()))  # none running: no row
    written = rows(tmp_path / "s")
    assert list(written[0]) == list(CONTAINER_COLUMNS)
    assert [(r["t"], r["name"], r["gpu_mem_bytes"]) for r in written] == [
        ("999.5", "trainer", ""),
        ("999.5", "db", ""),
        ("1000.5", "trainer", str(10 * GiB)),
        ("1000.5", "db", "0"),
    ]
    assert written[2]["gpus"] == "0 GPU-1a2b" and written[2]["id"] == A
    assert written[2]["block_write_bytes_s"] == "" and written[2]["pids"] == "57"


def test_the_reader_gives_back_the_ticks_and_an_empty_one_after_a_gap(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        for t in (1000.0, 1001.0, 1002.0, 1003.0, 1004.0, 1005.0, 1006.0, 1007.0):
            writer.write_gpu_tick(gpu_tick(t))
            if t in (1000.0, 1001.0, 1004.0):
                writer.write_containers(full(t + 0.5))
    ticks = list(load_session(tmp_path / "s").container_ticks())
    # 1001.5 -> 1004.5 is a gap: none ran from 1002.5; after 1004.5 none ran up to 1007.
    assert [t.taken_at for t in ticks] == [1000.5, 1001.5, 1002.5, 1004.5, 1005.5]
    assert ticks[0].containers == full(0).containers  # every value as written
    assert ticks[2].containers == () and ticks[4].containers == ()
    assert ticks[3].containers == full(0).containers
    assert all(t.engine is None for t in ticks)  # not recorded


def test_bad_rows_are_skipped_and_bad_cells_read_as_na_and_both_counted(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_gpu_tick(gpu_tick(1000.0))
    header = ",".join(CONTAINER_COLUMNS)
    blank = [""] * (len(CONTAINER_COLUMNS) - 5)
    lines = [
        header,
        ",".join(["1000.0", A, "trainer", "busybox", "running", "-5", *blank[1:]]),
        ",".join(["1000.0", "abc", "short", "busybox", "running", *blank]),
        ",".join(["1000.0", "", "noid", "busybox", "running", *blank]),
        ",".join(["oops", B, "db", "busybox", "running", *blank]),
    ]
    (tmp_path / "s" / "containers.csv").write_text("\n".join(lines) + "\n")
    session = load_session(tmp_path / "s")
    (tick,) = list(session.container_ticks())
    assert [c.name for c in tick.containers] == ["trainer"]
    assert tick.containers[0].cpu_pct is None
    warnings = "\n".join(session.warnings)
    assert "containers.csv: skipped 3 lines" in warnings
    assert "line 3: id: 'abc' is not a container id" in warnings
    assert (
        "1 bad cell read as N/A (first: line 2, cpu_pct: '-5' is outside 0 to 1000000)" in warnings
    )


def test_a_session_without_containers_csv_has_no_container_replay(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_gpu_tick(gpu_tick(1000.0))
    assert SessionReplay(tmp_path / "s").container_collector() is None
    assert list(load_session(tmp_path / "s").container_ticks()) == []


def test_replay_hands_out_the_recorded_ticks_under_the_containers_role(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        for t in (1000.0, 1001.0):
            writer.write_gpu_tick(gpu_tick(t))
            writer.write_containers(full(t + 0.5))
    replay = SessionReplay(tmp_path / "s", check_all=True)
    (collector,) = [c for c in replay.collectors() if c.name == "replay:containers"]
    assert collector.role == CONTAINERS
    collector.open()
    got = [collector.sample(), collector.sample()]
    collector.close()
    assert [t.taken_at for t in got] == [1000.5, 1001.5]
    assert got[0].containers[0].name == "trainer" and got[0].containers[0].pids == 57
    assert replay.warnings == []


def test_the_recorder_writes_container_ticks(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s", META)
    recorder = Recorder(writer)
    recorder.start()
    recorder.emit(Sampled("docker", full(1000.5)))
    assert recorder.shutdown()
    writer.close()
    assert [r["name"] for r in rows(tmp_path / "s")] == ["trainer", "db"]
    assert not [
        e for e in load_session(tmp_path / "s").events() if e["kind"] == "sample_not_recorded"
    ]


names = st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,40}", fullmatch=True)
images = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=60)
rates = st.none() | st.floats(0, 1e12, allow_nan=False)
counts = st.none() | st.integers(0, 2**53 - 1)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=names,
    image=images,
    status=st.sampled_from(["running", "paused", "restarting"]),
    cpu=st.none() | st.floats(0, 1e6, allow_nan=False),
    memory=counts,
    limit=counts,
    rx=rates,
    pids=counts,
    gpus=st.lists(st.from_regex(r"[A-Za-z0-9-]{1,40}", fullmatch=True), max_size=4),
    started=st.none() | st.floats(0, 1e11, allow_nan=False),
)
def test_any_container_sample_survives_writing_and_reading(
    tmp_path_factory: pytest.TempPathFactory,
    name,
    image,
    status,
    cpu,
    memory,
    limit,
    rx,
    pids,
    gpus,
    started,
) -> None:
    path = tmp_path_factory.mktemp("s") / "s"
    sample = ContainerSample(
        id=A,
        short_id=A[:12],
        name=name,
        image=image,
        status=status,
        started_at=started,
        cpu_pct=cpu,
        memory_used_bytes=memory,
        memory_limit_bytes=limit,
        net_rx_bytes_per_s=rx,
        pids=pids,
        gpu_devices=tuple(gpus),
    )
    with SessionWriter(path, META) as writer:
        writer.write_gpu_tick(gpu_tick(1000.0))
        writer.write_containers(ContainerTick(1000.5, (sample,)))
    session = load_session(path)
    (tick,) = list(session.container_ticks())
    assert tick.containers == (sample,)
    assert session.warnings == []


def test_the_recording_thread_and_the_reader_agree_on_the_file(tmp_path: Path) -> None:
    # A reader opening the session while it is being written sees whole rows only.
    writer = SessionWriter(tmp_path / "s", META, flush_interval_s=0.0)
    writer.write_gpu_tick(gpu_tick(1000.0))
    done = threading.Event()

    def write() -> None:
        for i in range(200):
            writer.write_containers(full(1000.0 + i))
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    done.wait(30)
    thread.join()
    writer.close()
    assert len(list(load_session(tmp_path / "s").container_ticks())) == 200

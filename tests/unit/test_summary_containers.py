"""Summaries of recorded containers: peak GPU memory and CPU per container, read like a replay."""

from __future__ import annotations

import json
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
from collectors.session.session_format import CONTAINER_COLUMNS
from gpuherd.session.session import SessionWriter, load_session
from gpuherd.summary import report
from gpuherd.summary.frames import load_frames
from gpuherd.summary.summary import summarize

GiB = 1 << 30
T0 = 1_764_130_000.0
META = {"host": "box", "driver": "580.159.04", "started_at": T0, "interval_s": 1.0}
A, B, C = "a" * 64, "b" * 64, "c" * 64


def box(
    cid: str, name: str, cpu: float | None, memory: int, image: str = "busybox:1"
) -> ContainerSample:
    return ContainerSample(
        id=cid,
        short_id=cid[:12],
        name=name,
        image=image,
        status="running",
        cpu_pct=cpu,
        memory_used_bytes=memory,
        memory_limit_bytes=64 * GiB,
    )


def record(path: Path, image_b: str = "busybox:1") -> Path:
    """20 s: trainer (A) grows to 12 GiB on two GPUs at +9 s; db (B) never uses a GPU."""
    with SessionWriter(path, META) as writer:
        for i in range(20):
            t = T0 + i
            gib = 12 if i == 9 else min(i, 8)
            writer.write_gpu_tick(
                GpuTick(
                    t,
                    (
                        GpuSample(0, "GPU-0", "H100", processes=(GpuProcess(100, gib * GiB // 2),)),
                        GpuSample(1, "GPU-1", "H100", processes=(GpuProcess(100, gib * GiB // 2),)),
                    ),
                )
            )
            writer.write_host(HostSample(t + 0.1, processes=(ProcessInfo(100, container=A[:12]),)))
            writer.write_containers(
                ContainerTick(
                    t + 0.5,
                    (
                        box(A, "trainer", None if i == 0 else 100.0 + i, (i + 1) * GiB),
                        box(B, "db", 2.0 if i % 2 else 4.0, GiB, image_b),
                    ),
                )
            )
    return path


def test_each_container_has_its_peak_gpu_memory_when_and_its_cpu(tmp_path: Path) -> None:
    data = summarize(record(tmp_path / "s")).data
    db, trainer = data["containers"]
    assert trainer["name"] == "trainer" and trainer["id"] == A
    assert trainer["gpu_mem_peak_bytes"] == 12 * GiB  # 6 + 6 on two GPUs at +9 s
    assert trainer["gpu_mem_peak_at"] == T0 + 9.5
    assert trainer["gpu_mem_peak_at_elapsed_s"] == 9.5
    assert trainer["cpu_max_pct"] == 119.0  # peaks: the whole session
    # Means cover the window, the GPU rows' span (T0 to T0+19): the row at +19.5 is after it,
    # the one at +0.5 has no CPU figure yet (one reading).
    assert trainer["cpu_mean_pct"] == sum(100 + i for i in range(1, 19)) / 18 == 109.5
    assert trainer["cpu_p95_pct"] == 117.15
    assert trainer["mem_peak_bytes"] == 20 * GiB and trainer["mem_limit_bytes"] == 64 * GiB
    assert (trainer["first_t"], trainer["last_t"]) == (T0 + 0.5, T0 + 19.5)
    assert db["gpu_mem_peak_bytes"] == 0 and db["cpu_max_pct"] == 4.0
    assert db["cpu_mean_pct"] == round((10 * 4.0 + 9 * 2.0) / 19, 2) and db["image"] == "busybox:1"
    stats = {s["key"]: s for s in data["stats"]}
    assert stats["container:trainer/gpu_mem (GiB)"]["max"] == 12.0
    assert stats["container:db/cpu (%)"]["count"] == 19
    json.dumps(data, allow_nan=False)


def test_markdown_and_the_short_text_name_the_containers(tmp_path: Path) -> None:
    path = record(tmp_path / "s")
    frames = load_frames(path)
    from gpuherd.summary.summary import summarize_frames

    summary = summarize_frames(frames)
    markdown = report.render_markdown(summary, frames)
    assert "## Containers" in markdown
    assert "| trainer | busybox:1 | 12.0 GiB | +9.5s | 110% | 117% | 119% | 20.0 GiB |" in markdown
    short = report.render_short(summary)
    assert "  container trainer: peak GPU memory 12.0 GiB, CPU mean 110% max 119%" in short
    assert "  container db: peak GPU memory 0 B, CPU mean 3% max 4%" in short


def test_without_containers_csv_there_is_no_container_section(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_gpu_tick(GpuTick(T0, (GpuSample(0, "GPU-0", "H100", processes=()),)))
    summary = summarize(tmp_path / "s")
    assert summary.data["containers"] == []
    assert "Containers" not in report.render_markdown(summary, load_frames(tmp_path / "s"))


def test_the_summary_reads_quoted_rows_and_skips_bad_ones_as_the_replay_does(
    tmp_path: Path,
) -> None:
    # A comma in an image name makes its rows quoted: that part is read row by row.
    path = record(tmp_path / "s", image_b="registry:5000/db,v2")
    with open(path / "containers.csv", "a") as f:
        blank = "," * (len(CONTAINER_COLUMNS) - 6)
        f.write(f"{T0 + 30},{A},trainer,busybox:1,running,-1{blank}\n")  # a bad cell
        f.write(f"{T0 + 31},tooshort,x,busybox:1,running,5{blank}\n")  # a skipped row
    data = summarize(path).data
    names = {c["name"]: c for c in data["containers"]}
    assert names["db"]["image"] == "registry:5000/db,v2"
    assert names["trainer"]["last_t"] == T0 + 30
    session = load_session(path)
    session.check(strict=False)
    replayed = [w for w in session.warnings if "containers.csv" in w]
    assert replayed and [w for w in data["warnings"] if "containers.csv" in w] == replayed


def test_a_name_used_by_two_containers_keeps_them_apart(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        writer.write_gpu_tick(GpuTick(T0, (GpuSample(0, "GPU-0", "H100", processes=()),)))
        writer.write_containers(ContainerTick(T0, (box(A, "job", 1.0, GiB),)))
        writer.write_containers(ContainerTick(T0 + 1, (box(C, "job", 2.0, GiB),)))
    names = [c["name"] for c in summarize(tmp_path / "s").data["containers"]]
    assert names == [f"job@{A[:12]}", f"job@{C[:12]}"]


def test_a_container_with_no_recorded_name_goes_by_its_short_id(tmp_path: Path) -> None:
    with SessionWriter(tmp_path / "s", META) as writer:
        for i in range(2):
            writer.write_gpu_tick(GpuTick(T0 + i, (GpuSample(0, "GPU-0", "H100", processes=()),)))
            writer.write_containers(
                ContainerTick(T0 + i, (box(A, "", 1.0 + 2 * i, GiB), box(B, "db", 2.0, GiB)))
            )
    summary = summarize(tmp_path / "s")
    assert [c["name"] for c in summary.data["containers"]] == [A[:12], "db"]
    cpu = {r["key"]: r["mean"] for r in summary.data["stats"] if r["key"].endswith("/cpu (%)")}
    assert cpu == {f"container:{A[:12]}/cpu (%)": 2, "container:db/cpu (%)": 2}

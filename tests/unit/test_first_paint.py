"""The plain first frame's lines: layout, sizes, values with their units, escapes shown."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from tui.first_paint import PROCESS_COLUMNS, WIDE_FROM, cell_width, cut, render

GiB = 1 << 30
NOW = 1_700_000_000.0
H100 = "NVIDIA H100 80GB HBM3"


def gpu(index: int, pids: tuple[int, ...] = (), used_gib: float = 5.0) -> GpuSample:
    return GpuSample(
        index=index,
        uuid=f"GPU-{index:08d}",
        name=H100,
        memory_used_bytes=int(used_gib * GiB),
        memory_total_bytes=80 * GiB,
        gpu_util_pct=97.0,
        mem_util_pct=40.0,
        processes=tuple(GpuProcess(pid, 4 * GiB) for pid in pids),
    )


def tick(count: int, per_gpu: int = 1) -> GpuTick:
    devices = tuple(gpu(i, tuple(1000 + i * 100 + k for k in range(per_gpu))) for i in range(count))
    return GpuTick(NOW, devices, driver_version="580.159.04", cuda_driver_version="13.0")


def host_for(sample: GpuTick, user: str = "alice", command: str = "python train.py") -> HostSample:
    infos = tuple(
        ProcessInfo(
            p.pid,
            user=user,
            command=command,
            cpu_pct=99.0,
            rss_bytes=3 * GiB,
            started_at=NOW - 3700,
        )
        for d in sample.devices
        for p in d.processes or ()
    )
    return HostSample(NOW, processes=infos)


def rows(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"│\s+\d+\s+\d+\s", line)]


def assert_fits(lines: list[str], width: int, height: int) -> None:
    assert len(lines) <= height
    assert all(cell_width(line) <= width for line in lines), [
        (cell_width(line), line) for line in lines if cell_width(line) > width
    ]


def test_one_gpu_at_160x50_has_two_gpu_lines_and_the_wide_table() -> None:
    sample = tick(1)
    lines = render(sample, host_for(sample), "node7", 160, 50)
    assert_fits(lines, 160, 50)
    assert lines[0].startswith("gpuherd  node7")
    assert lines[0].endswith("driver 580.159.04  CUDA 13.0")
    assert lines[2].startswith(f"│   0 {H100}")
    assert "VRAM 5.0 / 80.0 GiB   6%  UTIL  97%  MEM  40%" in lines[3]
    header = next(line for line in lines if "COMMAND" in line)
    assert header.startswith("│  GPU  PID      USER        GPU MEM    CPU%    RSS        ELAPSED  ")
    (row,) = rows(lines)
    assert row.startswith(
        "│    0     1000  alice         4.0 GiB     99%    3.0 GiB     1:01:40  python train.py"
    )
    assert all(cell_width(line) == 160 for line in lines)


def test_eight_gpus_at_80x24_take_one_line_each_and_leave_room_for_every_process() -> None:
    sample = tick(8)
    lines = render(sample, host_for(sample), "node7", 80, 24)
    assert_fits(lines, 80, 24)
    gpu_lines = [line for line in lines if H100 in line]
    assert len(gpu_lines) == 8
    assert all("VRAM 5.0 / 80.0 GiB   6%  UTIL  97%" in line for line in gpu_lines)
    assert [row.split()[1:3] for row in rows(lines)] == [
        [str(i), str(1000 + i * 100)] for i in range(8)
    ]
    assert "RSS" not in lines[-3] and "ELAPSED" not in "".join(lines)  # narrow: no wide columns


def test_eight_gpus_at_160x50_keep_two_lines_each() -> None:
    sample = tick(8)
    lines = render(sample, host_for(sample), "node7", 160, 50)
    assert_fits(lines, 160, 50)
    assert sum(H100 in line for line in lines) == 8
    assert sum("MEM  40%" in line for line in lines) == 8
    assert len(rows(lines)) == 8


def test_one_gpu_at_80x24_keeps_two_lines() -> None:
    sample = tick(1)
    lines = render(sample, host_for(sample), "node7", 80, 24)
    assert_fits(lines, 80, 24)
    assert lines[2].rstrip(" │").endswith(H100) and "MEM  40%" in lines[3]


def test_more_processes_than_lines_are_cut_to_the_screen_with_the_border_kept() -> None:
    sample = tick(1, per_gpu=40)
    lines = render(sample, host_for(sample), "node7", 80, 24)
    assert len(lines) == 24
    assert lines[-1].startswith("╰") and len(rows(lines)) == 24 - 5 - 3


def test_rows_come_largest_gpu_memory_first_like_the_dashboard() -> None:
    small = GpuSample(
        0,
        "GPU-0",
        H100,
        processes=(GpuProcess(10, 1 * GiB), GpuProcess(20, 8 * GiB), GpuProcess(30, None)),
    )
    lines = render(GpuTick(NOW, (small,)), None, "h", 120, 30)
    assert [row.split()[2] for row in rows(lines)] == ["20", "10", "30"]


def test_without_host_details_the_cells_say_na_and_unknown_memory_too() -> None:
    unknown = GpuSample(0, "GPU-0", H100, processes=(GpuProcess(10, None),))
    lines = render(GpuTick(NOW, (unknown,)), None, "h", 120, 30)
    assert "VRAM N/A  N/A  UTIL  N/A" in lines[3]
    assert rows(lines)[0].split()[1:5] == ["0", "10", "N/A", "N/A"]
    assert "driver N/A" in lines[0]


def test_escapes_in_others_strings_are_shown_as_escapes() -> None:
    sample = GpuTick(NOW, (gpu(0, (1000,)),), driver_version="5\x1b[2J")
    host = host_for(sample, user="al\x1b[31m", command="rm\x1b]0;owned\x07 \u202eevil")
    lines = render(sample, host, "node\x9b7", 160, 50)
    text = "".join(lines)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in text)
    assert "al\\x1b[31m" in rows(lines)[0] and "rm\\x1b]0;owned\\x07 \\u202eevil" in text
    assert "node\\x9b7" in lines[0] and "driver 5\\x1b[2J" in lines[0]


def test_a_gpu_error_is_shown_on_its_line() -> None:
    broken = GpuSample(0, "GPU-0", H100, error="GPU is lost")
    assert "ERROR: GPU is lost" in render(GpuTick(NOW, (broken,)), None, "h", 100, 30)[2]


def test_wide_characters_count_two_cells_and_are_cut_to_fit() -> None:
    sample = tick(1)
    lines = render(sample, host_for(sample, command="训练 " * 60), "h", 80, 24)
    assert_fits(lines, 80, 24)
    assert rows(lines)[0].endswith("…   │") or rows(lines)[0].endswith("…  │")
    assert cut("训练训练", 5) == "训练…" and cell_width("训练") == 4


def test_too_small_a_terminal_gets_no_frame() -> None:
    assert render(tick(1), None, "h", 19, 24) == [] and render(tick(1), None, "h", 80, 2) == []


def test_the_columns_are_the_dashboards() -> None:
    from tui.widgets import process_table

    assert PROCESS_COLUMNS == tuple((c.key, c.label, c.width) for c in process_table.COLUMNS)
    assert WIDE_FROM == process_table.WIDE_FROM


def test_the_first_frame_loads_neither_textual_nor_rich() -> None:
    code = (
        "import sys, tui.first_paint_term; "
        "print(sorted(m for m in ('textual', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@settings(max_examples=150, deadline=None)
@given(
    user=st.text(),
    command=st.text(),
    hostname=st.text(),
    name=st.text(),
    width=st.integers(1, 300),
    height=st.integers(1, 80),
    count=st.integers(1, 8),
)
def test_any_text_at_any_size_fits_and_steers_nothing(
    user: str, command: str, hostname: str, name: str, width: int, height: int, count: int
) -> None:
    devices = tuple(
        GpuSample(i, f"GPU-{i}", name, processes=(GpuProcess(100 + i, GiB),)) for i in range(count)
    )
    sample = GpuTick(NOW, devices)
    lines = render(sample, host_for(sample, user=user, command=command), hostname, width, height)
    assert_fits(lines, width, height)
    steering = ("Cc", "Cf", "Cs", "Zl", "Zp")  # controls, bidi overrides, separators
    assert not any(
        unicodedata.category(c) in steering
        for line in lines
        for c in line
        if c not in "\u200c\u200d"
    )

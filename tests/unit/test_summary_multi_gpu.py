"""A two-GPU session whose GPUs differ in every figure, with every summary number worked by hand.

The older fixture is symmetric (its utilization mean equals its median, GPU 1 idles at one
value), so a summary that took the median, mixed GPUs up or ignored the command's window for
the host still passed. Here GPU 0 is mostly idle with a burst at the end of the command
(mean 27.27, median 0), GPU 1 busy with one idle sample (mean 81.82, median 90); their peaks
come at different times, and the host is busy only outside the command's window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.session.session_format import (
    EVENTS_FILE,
    GPU_FILE,
    GPU_WRITTEN,
    HOST_FILE,
    HOST_WRITTEN,
    META_FILE,
    SCHEMA_VERSION,
)
from gpuherd.summary.summary import summarize

GIB = 1 << 30
T0 = 1_764_130_000.0
H200_TOTAL = 150_754_820_096
A100_TOTAL = 40 * GIB
START, END = 10, 20
"""The command runs from T0+10 to T0+20: rows 10..20 of each GPU (11), host rows 10.5..19.5."""


def gpu0(i: int) -> str:
    util = (0 if i < 18 else 100) if START <= i <= END else 50
    peak = {3: 20 * GIB, 12: 30 * GIB}.get(i)
    temp = 85 if i == 25 else 60
    power = 650 if i == 5 else 300
    return (
        f"{T0 + i},0,GPU-aaaa,NVIDIA H200,{10 * GIB},{H200_TOTAL},{util},30,{temp},{power},"
        f"{'' if peak is None else peak}"
    )


def gpu1(i: int) -> str:
    util = (90 if i < END else 0) if START <= i <= END else 5
    used = 5 * GIB if i == 25 else GIB
    peak = 4 * GIB if i == 3 else None
    return (
        f"{T0 + i},1,GPU-bbbb,NVIDIA A100-SXM4-40GB,{used},{A100_TOTAL},{util},20,40,100,"
        f"{'' if peak is None else peak}"
    )


def host(i: int) -> str:
    inside = START <= i < END
    return f"{T0 + i + 0.5},{10 + i if inside else 95},{i * GIB},{64 * GIB}"


@pytest.fixture
def session(tmp_path: Path) -> Path:
    # Per test, not per module: mutation testing runs only the tests that call the code.
    root = tmp_path / "two_gpus"
    root.mkdir()
    meta = {
        "schema": SCHEMA_VERSION,
        "host": "box-2",
        "driver": "580.159.04",
        "started_at": T0,
        "ended_at": T0 + 30,
        "interval_s": 1.0,
        "command": ["python", "train.py"],
        "exit_code": 0,
        "gpus": [
            {"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA H200", "mem_total_bytes": H200_TOTAL},
            {
                "index": 1,
                "uuid": "GPU-bbbb",
                "name": "NVIDIA A100-SXM4-40GB",
                "mem_total_bytes": A100_TOTAL,
            },
        ],
    }
    (root / META_FILE).write_text(json.dumps(meta))
    header = ",".join((*GPU_WRITTEN, "mem_peak_bytes"))
    rows = [row for i in range(30) for row in (gpu0(i), gpu1(i))]
    (root / GPU_FILE).write_text("\n".join([header, *rows]) + "\n")
    (root / HOST_FILE).write_text(
        "\n".join([",".join(HOST_WRITTEN), *(host(i) for i in range(30))]) + "\n"
    )
    events = [
        {"t": T0 + START, "kind": "start", "pid": 7},
        {"t": T0 + END, "kind": "exit", "exit_code": 0},
    ]
    (root / EVENTS_FILE).write_text("".join(json.dumps(e) + "\n" for e in events))
    return root


@pytest.fixture
def data(session: Path) -> dict:
    return summarize(session).data


@pytest.fixture
def stats(data: dict) -> dict[str, dict]:
    return {row["key"]: row for row in data["stats"]}


def test_the_window_is_the_commands_run(data: dict) -> None:
    assert data["window"] == {"start": T0 + START, "end": T0 + END, "source": "command"}


def test_each_gpu_has_its_own_peak_and_when(data: dict) -> None:
    first, second = data["gpus"]
    assert (first["index"], first["uuid"], first["name"]) == (0, "GPU-aaaa", "NVIDIA H200")
    assert (second["index"], second["uuid"], second["name"]) == (
        1,
        "GPU-bbbb",
        "NVIDIA A100-SXM4-40GB",
    )
    # GPU 0: the fast peak of 30 GiB at +12 (above its 10 GiB rows and its 20 GiB peak at +3).
    assert (first["peak_mem_bytes"], first["peak_at"], first["peak_at_elapsed_s"]) == (
        30 * GIB,
        T0 + 12,
        12.0,
    )
    assert first["peak_mem_gib"] == 30.0
    assert first["peak_mem_pct"] == 21.37  # 30 GiB of 140.4 GiB
    # GPU 1: a 1 Hz reading of 5 GiB at +25 beats its fast peak of 4 GiB at +3. Peaks cover
    # the whole session, not only the command's window.
    assert (second["peak_mem_bytes"], second["peak_at"], second["peak_at_elapsed_s"]) == (
        5 * GIB,
        T0 + 25,
        25.0,
    )
    assert second["peak_mem_pct"] == 12.5  # of its own 40 GiB, not of GPU 0's total
    assert (first["mem_total_bytes"], second["mem_total_bytes"]) == (H200_TOTAL, A100_TOTAL)


def test_utilization_is_the_mean_inside_the_window_per_gpu(data: dict) -> None:
    first, second = data["gpus"]
    assert first["util_mean_pct"] == 27.27  # 3 x 100 over 11 samples; the median is 0
    assert second["util_mean_pct"] == 81.82  # 10 x 90 over 11; the median is 90
    assert first["util_p95_pct"] == 100
    assert second["util_p95_pct"] == 90


def test_maxima_cover_the_session_per_gpu(data: dict) -> None:
    first, second = data["gpus"]
    assert (first["temp_max_c"], first["power_max_w"]) == (85, 650)
    assert (second["temp_max_c"], second["power_max_w"]) == (40, 100)


def test_gpu_statistics_rows_are_per_gpu_and_windowed(stats: dict[str, dict]) -> None:
    assert stats["gpu0/util_gpu (%)"] == {
        "key": "gpu0/util_gpu (%)",
        "count": 11,
        "mean": 27.2727,
        "min": 0,
        "max": 100,
        "p95": 100,
        "unit": "%",
    }
    assert stats["gpu1/util_gpu (%)"] == {
        "key": "gpu1/util_gpu (%)",
        "count": 11,
        "mean": 81.8182,
        "min": 0,
        "max": 90,
        "p95": 90,
        "unit": "%",
    }
    # inside the window GPU 0's rows hold 10 GiB, and 30 GiB at the +12 peak
    peak0 = stats["gpu0/mem_peak (GiB)"]
    assert (peak0["count"], peak0["mean"], peak0["min"], peak0["max"]) == (11, 11.8182, 10, 30)
    # GPU 1's 5 GiB at +25 is outside the window: its windowed peak is 1 GiB
    peak1 = stats["gpu1/mem_peak (GiB)"]
    assert (peak1["count"], peak1["mean"], peak1["min"], peak1["max"]) == (11, 1, 1, 1)
    assert stats["gpu1/mem_used (GiB)"]["max"] == 1
    assert stats["gpu0/temp (C)"]["max"] == 60  # the 85 C at +25 is after the command
    assert stats["gpu0/power (W)"]["max"] == 300  # the 650 W at +5 is before it
    assert stats["gpu1/util_mem (%)"]["mean"] == 20
    assert stats["gpu0/util_mem (%)"]["mean"] == 30


def test_host_statistics_cover_only_the_window(stats: dict[str, dict]) -> None:
    # host rows at +10.5 .. +19.5: cpu 20..29 %, memory 10..19 GiB; 95 % outside
    assert stats["host/cpu (%)"] == {
        "key": "host/cpu (%)",
        "count": 10,
        "mean": 24.5,
        "min": 20,
        "max": 29,
        "p95": 28.55,
        "unit": "%",
    }
    assert stats["host/mem_used (GiB)"] == {
        "key": "host/mem_used (GiB)",
        "count": 10,
        "mean": 14.5,
        "min": 10,
        "max": 19,
        "p95": 18.55,
        "unit": "GiB",
    }


def test_the_statistics_list_each_gpu_then_the_host(stats: dict[str, dict]) -> None:
    metrics = [
        "mem_used (GiB)",
        "mem_peak (GiB)",
        "util_gpu (%)",
        "util_mem (%)",
        "temp (C)",
        "power (W)",
    ]
    assert sorted(stats) == sorted(
        [f"gpu{i}/{m}" for i in (0, 1) for m in metrics] + ["host/cpu (%)", "host/mem_used (GiB)"]
    )
    assert list(stats)[-2:] == ["host/cpu (%)", "host/mem_used (GiB)"]


def test_without_a_command_the_window_is_every_row(tmp_path: Path, session: Path) -> None:
    root = tmp_path / "no_command"
    root.mkdir()
    for name in (GPU_FILE, HOST_FILE):
        (root / name).write_bytes((session / name).read_bytes())
    meta = json.loads((session / META_FILE).read_text())
    del meta["command"]
    (root / META_FILE).write_text(json.dumps(meta))
    data = summarize(root).data
    assert data["window"] == {"start": T0, "end": T0 + 29, "source": "session"}
    # GPU 1 over all 30 rows: 19 x 5 outside, 10 x 90 and one 0 inside = 995 / 30
    assert data["gpus"][1]["util_mean_pct"] == 33.17
    host = {row["key"]: row for row in data["stats"]}["host/cpu (%)"]
    # the host row at +29.5 falls after the last GPU row, which ends the session's window
    assert (host["count"], host["min"], host["max"]) == (29, 20, 95)

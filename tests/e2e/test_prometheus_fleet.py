"""Two replayed hosts exported, scraped by a real Prometheus, read back, and shown by the fleet."""

from __future__ import annotations

import csv
import math
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane
from tests.prometheus import (
    Prometheus,
    free_port,
    get,
    prometheus_binary,
    running_prometheus,
    wait_for,
)

SESSIONS = REPO / "tests" / "data" / "sessions"
HOSTS = {"e2e-box": SESSIONS / "e2e", "tasks-box": SESSIONS / "tasks"}

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def last_rows(path: Path, key: str) -> dict[str, dict[str, str]]:
    """The last row of each `key` value (each GPU, each pid) at the file's last time."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    last_t = rows[-1]["t"]
    return {row[key]: row for row in rows if row["t"] == last_t}


def last_metric(session: Path, task: str, metric: str) -> float:
    with open(session / "metrics.csv", newline="") as f:
        return float(
            [r for r in csv.DictReader(f) if r["task"] == task and r["metric"] == metric][-1][
                "value"
            ]
        )


@pytest.fixture
def exporters(tmp_path: Path) -> Iterator[dict[str, tuple[int, subprocess.Popen[bytes]]]]:
    prometheus_binary()  # fails under CI=true, skips elsewhere, before anything starts
    started = {}
    for host, session in HOSTS.items():
        port = free_port()
        log = open(tmp_path / f"{host}.log", "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuherd",
                "serve-metrics",
                f"127.0.0.1:{port}",
                "--replay",
                str(session),
                "--speed",
                "1000",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started[host] = (port, process)
    yield started
    for _, process in started.values():
        process.terminate()
        process.wait(10)


def check_against_sessions(prom: Prometheus) -> None:
    for host, session in HOSTS.items():
        for gpu, row in last_rows(session / "gpu.csv", "gpu").items():

            def value(name: str, host: str = host, gpu: str = gpu) -> float | None:
                return prom.value(f'{name}{{host="{host}",gpu="{gpu}"}}')

            assert value("gpuherd_gpu_memory_used_bytes") == float(row["mem_used_bytes"])
            assert value("gpuherd_gpu_memory_total_bytes") == float(row["mem_total_bytes"])
            assert value("gpuherd_gpu_utilization_ratio") == float(row["util_gpu_pct"]) / 100
            assert value("gpuherd_gpu_temperature_celsius") == float(row["temp_c"])
            assert value("gpuherd_gpu_power_watts") == float(row["power_w"])
        for pid, row in last_rows(session / "processes.csv", "pid").items():
            assert prom.value(
                f'gpuherd_process_gpu_memory_bytes{{host="{host}",pid="{pid}",'
                f'user="{row["user"]}",gpu="{row["gpu"]}"}}'
            ) == float(row["used_bytes"])
    tasks = SESSIONS / "tasks"
    assert prom.value('gpuherd_task_loss{host="tasks-box",task="command"}') == last_metric(
        tasks, "command", "train/loss"
    )
    assert math.isnan(
        prom.value('gpuherd_task_loss{host="tasks-box",task="detr/train.log"}') or 0.0
    )
    assert (
        prom.value('gpuherd_task_findings{host="tasks-box",task="detr/train.log",kind="nan"}')
        == 1.0
    )
    assert prom.value('count(gpuherd_task_status{host="tasks-box"} == 1)') == 2.0


def test_two_replayed_hosts_reach_the_fleet_view_and_a_stopped_one_turns_stale(
    tmp_path: Path, exporters: dict[str, tuple[int, subprocess.Popen[bytes]]], pane: Pane
) -> None:
    for host, (port, _) in exporters.items():
        wait_for(
            lambda port=port: get(f"http://127.0.0.1:{port}/metrics")[0] == 200,
            what=f"the {host} exporter",
        )
    targets = [f"127.0.0.1:{port}" for port, _ in exporters.values()]
    with running_prometheus(tmp_path / "prometheus", targets, interval_s=1.0) as prom:
        # Three GPUs from both hosts, each at its session's last row (the replays have ended).
        wait_for(
            lambda: (
                prom.value("count(gpuherd_gpu_memory_used_bytes)") == 3.0
                and prom.value('gpuherd_task_step{task="command"}') is not None
            ),
            what="both hosts in Prometheus",
        )
        check_against_sessions(prom)

        # Without COLUMNS (the suite pins it to 120), Textual measures the pane itself.
        command = (
            f"cd {shlex.quote(str(REPO))} && env -u COLUMNS -u LINES "
            f"{shlex.quote(sys.executable)} -m gpuherd "
            f"fleet --prometheus {prom.url} --interval 0.5 --stale-after 3; "
            "echo GPUHERD_EXIT=$?; sleep 30"
        )
        pane.start(command, 200, 24)
        screen = pane.wait_for(
            lambda s: "e2e-box" in s and "tasks-box" in s and "NaN" in s, timeout_s=30
        )
        lines = [line for line in screen.splitlines() if "-box" in line]
        # Most free memory first: tasks-box (66 GiB free), then e2e-box's GPUs 0 and 1.
        assert [line.split()[0] for line in lines] == ["tasks-box", "e2e-box", "e2e-box"]
        assert "2 hosts · 3 GPUs" in screen and "stale" not in screen
        assert "18.0 / 79.6 GiB" in lines[0] and "90%" in lines[0]
        assert "command" in lines[0] and "detr/train.log" in lines[0] and "NaN" in lines[0], screen
        assert "carol" in lines[1] and "dave" in lines[2]

        port, process = exporters["e2e-box"]
        process.terminate()
        process.wait(10)
        screen = pane.wait_for(
            lambda s: "1 stale" in s and s.count("e2e-box stale") == 2, timeout_s=30
        )
        lines = [line for line in screen.splitlines() if "-box" in line]
        assert lines[0].split()[0] == "tasks-box" and "stale" not in lines[0]
        assert "42.2 / 79.6 GiB" in screen  # the stale host keeps its last figures, dimmed
        pane.keys("q")
        screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
        assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen


def test_fleet_against_a_prometheus_without_gpuherd_series_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    port = free_port()  # a target that never answers: Prometheus runs, with no GPU series
    with running_prometheus(tmp_path / "prometheus", [f"127.0.0.1:{port}"]) as prom:
        wait_for(lambda: prom.query("up") != [], what="a first (failed) scrape")
        done = subprocess.run(
            [sys.executable, "-m", "gpuherd", "fleet", "--prometheus", prom.url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr == (
        f"gpuherd: fleet: Prometheus at {prom.url} holds no gpuherd_gpu_* or "
        "DCGM_FI_DEV_* series: add a scrape of `gpuherd serve-metrics` or "
        "dcgm-exporter (docs/fleet.md)\n"
    )

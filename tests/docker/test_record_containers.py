"""`gpuherd record` beside a real engine: containers.csv, its replay and its summary."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.replay.replay import SessionReplay
from tests.docker_env import BUSY_PCT, Containers

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def test_a_recording_keeps_the_containers_for_replay_and_summary(
    containers: Containers, tmp_path: Path
) -> None:
    busy = containers.busy("rec", "--memory", "64m")
    session = tmp_path / "session"
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "record", str(session), "--duration", "5s"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    with open(session / "containers.csv", newline="") as f:
        mine = [r for r in csv.DictReader(f) if r["name"] == busy.name]
    assert len(mine) >= 3 and {r["id"] for r in mine} == {busy.id}
    assert {r["mem_limit_bytes"] for r in mine if r["mem_limit_bytes"]} == {str(64 * MiB)}
    assert any(float(r["cpu_pct"]) > BUSY_PCT for r in mine if r["cpu_pct"])

    replay = SessionReplay(session, check_all=True)
    collector = replay.container_collector()
    assert collector is not None
    collector.open()
    first = collector.sample()
    collector.close()
    assert busy.name in [c.name for c in first.containers]
    assert replay.warnings == []

    summary = json.loads((session / "summary.json").read_text())
    (entry,) = [c for c in summary["containers"] if c["name"] == busy.name]
    assert entry["id"] == busy.id and entry["mem_limit_bytes"] == 64 * MiB
    assert entry["cpu_max_pct"] > BUSY_PCT
    assert entry["gpu_mem_peak_bytes"] is None  # no GPU here: not known, never 0
    assert f"container {busy.name}: peak GPU memory -" in out.stderr  # the short summary

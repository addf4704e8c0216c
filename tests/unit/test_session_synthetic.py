"""The synthetic session generator of the benchmarks writes a valid, clearly labelled session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuherd.session.session import load_session

ROOT = Path(__file__).resolve().parents[2]


def test_make_session_writes_a_valid_labelled_session(tmp_path):
    out = tmp_path / "synthetic"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "make_session.py"),
            str(out),
            "--gpus",
            "3",
            "--hours",
            "0.01",
            "--procs-per-gpu",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "SYNTHETIC 3 GPUs x 36 ticks" in done.stdout
    session = load_session(out)
    session.check()
    assert session.meta["synthetic"] is True and session.meta["host"] == "synthetic-host"
    assert session.meta["ended_at"] == session.meta["started_at"] + 36
    ticks = list(session.gpu_ticks())
    assert len(ticks) == 36 and all(len(t.devices) == 3 for t in ticks)
    assert all(len(d.processes or ()) == 2 for t in ticks for d in t.devices)
    hosts = list(session.host_samples())
    assert len(hosts) == 36 and {p.pid for p in hosts[0].processes} == {
        10000,
        10001,
        10100,
        10101,
        10200,
        10201,
    }
    assert session.warnings == []

"""The process table's benchmark runs, counts the lines it draws, and measures this tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_process_table.py"


def test_the_benchmark_draws_one_line_for_one_changed_row_of_fifty() -> None:
    out = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), "--rows", "50", "--cases", "one", "--frames", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[0])
    assert result["tree"] == str(ROOT / "tui" / "widgets" / "process_table.py")
    assert result["rows"] == 50 and result["lines_drawn"] == 1
    assert result["total_us"] > 0

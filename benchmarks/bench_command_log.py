"""Wall time of the recorded command's output path: supervisor start, a line without end, a flood.

Figures: "40 MiB without a newline reaches command.log in well under a second" (it took 17 s
when the partial line was joined again for every 64 KiB chunk) and the cost of the supervisor
that every recorded command now starts under.

Each case runs a real command through `ChildCommand` (the supervisor, the pipes, the log on
a temporary directory), without echo, and checks the log byte for byte afterwards:

- `start`: `true`, so the figure is the supervisor's start and end (median of `--runs`);
- `long_line`: `--mib` MiB of `x` without a newline, in 64 KiB writes;
- `flood`: `--mib` MiB of 100-byte lines on stdout and as much on stderr.

    python benchmarks/bench_command_log.py [--mib 40] [--runs 5]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuherd.proc.child import ChildCommand  # noqa: E402

LONG_LINE = (
    "import sys\nout = sys.stdout.buffer\nchunk = b'x' * 65536\n"
    "for _ in range({n} // 65536):\n    out.write(chunk)\nout.flush()\n"
)
FLOOD = (
    "import sys, threading\nline = b'y' * 99 + b'\\n'\nblock = line * 655\n"
    "def spam(out):\n    for _ in range({n} // len(block)):\n        out.write(block)\n"
    "    out.flush()\n"
    "t = threading.Thread(target=spam, args=(sys.stderr.buffer,))\nt.start()\n"
    "spam(sys.stdout.buffer)\nt.join()\n"
)


def run(argv: list[str], directory: Path) -> tuple[float, Path]:
    log = directory / "command.log"
    log.unlink(missing_ok=True)
    began = time.perf_counter()
    child = ChildCommand(argv, log, echo=False)
    child.start()
    code = child.wait()
    child.finish()
    elapsed = time.perf_counter() - began
    if code != 0:
        raise SystemExit(f"{argv[:3]} exited with {code}")
    return elapsed, log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    size = opts.mib << 20
    result: dict[str, object] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mib": opts.mib,
    }
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        result["start_s"] = round(
            statistics.median(run(["true"], directory)[0] for _ in range(opts.runs)), 3
        )
        elapsed, log = run([sys.executable, "-c", LONG_LINE.format(n=size)], directory)
        assert log.stat().st_size == size and set(log.read_bytes()) == {ord("x")}
        result["long_line_s"] = round(elapsed, 3)
        elapsed, log = run([sys.executable, "-c", FLOOD.format(n=size)], directory)
        block = 100 * 655
        expected = 2 * (size // block) * block
        assert log.stat().st_size == expected
        assert set(log.read_bytes().split(b"\n")) == {b"y" * 99, b""}
        result["flood_s"] = round(elapsed, 3)
        result["flood_mb_per_s"] = round(expected / 1e6 / elapsed, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

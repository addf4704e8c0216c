"""`gpuherd monitor` over a fake NVML: one H100 whose one process is PID (default: this one).

Everything but the driver is real (host collector, threads, Textual, the terminal), so tmux
tests and start-up benchmarks can run the live path on a machine without a GPU:

    python -m tests.e2e.live_fake_nvml [PID]
"""

from __future__ import annotations

import os
import sys

from collectors.machine.nvml import ProcessEntry
from gpuherd.dashboard import monitor
from tests.fakes import FakeGpu, FakeNvml, GiB

GPU_NAME = "NVIDIA H100 80GB HBM3"


def fake_h100(pid: int) -> FakeNvml:
    """One busy H100 with `pid` holding 4 GiB of its memory."""
    return FakeNvml(
        [
            FakeGpu(
                name=GPU_NAME,
                total=80 * GiB,
                used=5 * GiB,
                util=(97, 40),
                compute=[ProcessEntry(pid=pid, used_memory_bytes=4 * GiB)],
            )
        ]
    )


def main(argv: list[str]) -> int:
    pid = int(argv[0]) if argv else os.getpid()
    return monitor.show(monitor.live_plan(1.0, nvml_backend=fake_h100(pid)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python tests/queue_fake_gpus.py N queue ...`: the command line with a host of N fake GPUs.

The one NVML seam (`tests/fakes.py` `FakeNvml`) in a real process, for `queue add --gpus K`
on a machine without a driver.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuherd.cli import parse_args  # noqa: E402
from gpuherd.options import from_namespace
from gpuherd.queue import queue_command  # noqa: E402
from gpuherd.queue.options import QueueOptions  # noqa: E402
from tests.fakes import FakeGpu, FakeNvml  # noqa: E402

if __name__ == "__main__":
    count = int(sys.argv[1])
    gpus = [FakeGpu(uuid=f"GPU-fake-{n}") for n in range(count)]
    queue = from_namespace(QueueOptions, parse_args(sys.argv[2:]))
    sys.exit(queue_command.run(queue, nvml_backend=FakeNvml(gpus)))

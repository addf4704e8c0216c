"""`python tests/monitor_fake.py SCRIPT.json [dashboard flags]`: the dashboard on fake GPUs.

The same NVML seam as `tests/queue_runner_fake.py` (FakeNvml scripted from a JSON file, re-read
when it changes), for the live dashboard and `--queue` in a real terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuherd import monitor  # noqa: E402
from gpuherd.cli import parse_args  # noqa: E402
from gpuherd.commands.monitor import options  # noqa: E402
from tests.queue_runner_fake import ScriptedNvml  # noqa: E402

if __name__ == "__main__":
    script = Path(sys.argv[1])
    dashboard = options(parse_args(["monitor", *sys.argv[2:]]))
    sys.exit(monitor.run(dashboard, nvml_backend=ScriptedNvml(script)))

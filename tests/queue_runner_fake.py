"""`gpuherd queue run` with `tests/fakes.py` FakeNvml at the NVML seam, scripted from a JSON file.

    python tests/queue_runner_fake.py SCRIPT.json [queue run flags: --settle S --interval S ...]

The state and ledger directories come from GPUHERD_STATE_DIR and GPUHERD_LEDGER_DIR as for
the real command. SCRIPT.json, re-read whenever it changes (write it with a rename):

    {"gpus": [{"uuid": "GPU-...", "total": bytes, "used": bytes, "util": pct,
               "processes": [[pid, bytes], ...]}, ...]}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.machine.nvml import MemoryInfo, ProcessEntry  # noqa: E402
from gpuherd.commands.queue_run import add_run_arguments, check_run  # noqa: E402
from gpuherd.queue.ledger import default_ledger_dir  # noqa: E402
from gpuherd.queue.runner import run_headless  # noqa: E402
from gpuherd.queue.store import default_state_dir  # noqa: E402
from tests.fakes import FakeGpu, FakeNvml  # noqa: E402


def _gpus(script: dict) -> list[FakeGpu]:
    return [
        FakeGpu(
            uuid=g["uuid"],
            total=g["total"],
            used=g["used"],
            reserved=0,
            util=(int(g.get("util", 0)), 0),
            compute=[ProcessEntry(pid, used) for pid, used in g.get("processes", [])],
        )
        for g in script["gpus"]
    ]


class ScriptedNvml(FakeNvml):
    """FakeNvml whose GPUs follow a JSON file; it is looked at once per GPU reading round."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        super().__init__(_gpus(json.loads(path.read_text())))
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return st.st_mtime_ns, st.st_ino

    def memory_info(self, handle: int, v2: bool) -> MemoryInfo:
        if handle == 0:
            stamp = self._stamp()
            if stamp != self._seen:
                self._seen = stamp
                self.gpus[:] = _gpus(json.loads(self.path.read_text()))
        return super().memory_info(handle, v2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("script", type=Path)
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    problem = check_run(args)
    if problem:
        parser.error(problem)
    return run_headless(
        default_state_dir(),
        default_ledger_dir(),
        settle_s=args.settle,
        margin_bytes=args.margin_bytes,
        grace_s=args.grace,
        interval_s=args.interval,
        nvml_backend=ScriptedNvml(args.script),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

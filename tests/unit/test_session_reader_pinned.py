"""The session reader's numbers pinned: the replay's time span, its end after a damaged tail.

`SessionReader.time_span()` sets the replay's clock (its first sample, and one lap's length when
looping) and the end up to which the containers' "none ran" tick is given. Its end comes from
the tail of `gpu.csv` and `host.csv` without reading them through, so each way a recording can
end badly (a row cut inside its last cell, a garbage row, a blank line, a last row too long for
the tail that is read first) must still give the `t` of the last row the reader keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.session_format import (
    CONTAINER_COLUMNS,
    HOST_WRITTEN,
    METRICS_COLUMNS,
    SCHEMA_VERSION,
)
from collectors.session_reader import SessionReader
from tests.unit.test_summary import GPU_HEADER, T0, gpu_row

STARTED = T0 - 7.0
CUT = "dropped the last line, cut short (no newline at the end)"


def write(root: Path, gpu: list[str], *, host: list[float] | None = None,
          metrics: list[float] | None = None, containers: list[float] | None = None,
          gpu_tail: bytes = b"") -> Path:
    """A session directory: `gpu` rows as given, the other files with one row per `t`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.json").write_text(json.dumps(
        {"schema": SCHEMA_VERSION, "host": "box", "driver": "580.159.04",
         "started_at": STARTED, "interval_s": 1.0}))
    (root / "gpu.csv").write_bytes(
        "".join(line + "\n" for line in [GPU_HEADER, *gpu]).encode() + gpu_tail)
    if host is not None:
        (root / "host.csv").write_text("".join(
            f"{line}\n" for line in [",".join(HOST_WRITTEN),
                                     *(f"{t},10,{1 << 30},{64 << 30}" for t in host)]))
    if metrics is not None:
        (root / "metrics.csv").write_text("".join(
            f"{line}\n" for line in [",".join(METRICS_COLUMNS),
                                     *(f"{t},command,1,train/loss,0.5,1,0" for t in metrics)]))
    if containers is not None:
        blank = "," * (len(CONTAINER_COLUMNS) - 5)
        (root / "containers.csv").write_text("".join(
            f"{line}\n" for line in [",".join(CONTAINER_COLUMNS),
                                     *(f"{t},{'a' * 64},trainer,busybox,running{blank}"
                                       for t in containers)]))
    return root


def rows(*offsets: float, gpus: int = 1) -> list[str]:
    return [gpu_row(T0 + s, g, 1 << 30, 50) for s in offsets for g in range(gpus)]


def big_row(t: float, name_bytes: int) -> str:
    return gpu_row(t, 0, 1 << 30, 50).replace("NVIDIA H200", "N" * name_bytes)


@pytest.mark.parametrize(("last_names", "end"), [
    # Only the end of the file is read at first (64 KiB): the row at T0+5 starts outside it
    # and the one at T0+6 inside it.
    ((40_000, 40_000), T0 + 6),
    # The tail of a last row (T0+6, 100 KB) is all the first 64 KiB hold.
    ((10, 100_000), T0 + 6),
    # A garbage tail longer than 64 KiB: the row before it ends the session.
    ((10, 10), T0 + 5),
])
def test_the_span_ends_at_the_last_valid_row_however_far_back(
        tmp_path: Path, last_names: tuple[int, int], end: float) -> None:
    gpu = [*rows(0, 1, 2, 3, 4), big_row(T0 + 5, last_names[0]), big_row(T0 + 6, last_names[1])]
    garbage = b"x" * 70_000 + b"\n" if end == T0 + 5 else b""
    if garbage:
        gpu.pop()  # the garbage line takes the place of the last row
    root = write(tmp_path / "s", gpu, gpu_tail=garbage)
    assert (root / "gpu.csv").stat().st_size > 1 << 16
    reader = SessionReader(root)
    assert reader.last_t["gpu.csv"] == end
    assert reader.time_span() == (T0, end)
    assert [t.taken_at for t in reader.gpu_ticks()][-1] == end



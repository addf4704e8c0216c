"""A last row cut inside its last cell has every cell, but a wrong last value: it is dropped.

A recorder killed mid-write leaves `...,32212254720` as `...,3221225`: the row has the header's
number of cells, so only the missing newline tells it apart. Each reader (the replay's streaming
reader, the summary's columnar one, on the plain fast path and through the csv module) must
drop it and say so, never read a peak of 3 MB or epoch 1 for epoch 12.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.replay.replay_metrics import metric_batches
from collectors.session.session_reader import SessionReader
from gpuherd.summary.summary import summarize
from tests.unit.test_summary import GIB, T0, gpu_row, write_session

CUT = "dropped the last line, cut short (no newline at the end)"


def session(tmp_path: Path, quoted: bool) -> Path:
    rows = [gpu_row(T0 + i, 0, 2 * GIB, 50, peak=4 * GIB) for i in range(3)]
    last = gpu_row(T0 + 3, 0, 2 * GIB, 50, peak=30 * GIB)  # ends in ",32212254720"
    assert last.endswith(",32212254720")
    metrics = [f"{T0 + 1},command,1,train/loss,0.5,100,11"]
    last_metric = f"{T0 + 2},command,2,train/loss,0.4,200,12"
    if quoted:  # a quote sends the line through the csv module instead of the plain split
        rows = [r.replace("NVIDIA H200", '"NVIDIA H200"') for r in rows]
        last = last.replace("NVIDIA H200", '"NVIDIA H200"')
        last_metric = last_metric.replace(",command,", ',"command",')
    return write_session(
        tmp_path / "s",
        gpu_rows=rows,
        metrics=metrics,
        tail={"gpu": last[:-4], "metrics": last_metric[:-1]},
    )


@pytest.mark.parametrize("quoted", [False, True], ids=["plain", "quoted"])
def test_the_replay_reader_drops_it(tmp_path: Path, quoted: bool) -> None:
    root = session(tmp_path, quoted)
    reader = SessionReader(root)
    ticks = list(reader.gpu_ticks())
    assert [t.taken_at for t in ticks] == [T0, T0 + 1, T0 + 2]
    assert [t.devices[0].memory_used_bytes for t in ticks] == [2 * GIB] * 3
    metrics = [m for batch in metric_batches(reader) for _, m in batch.metrics]
    assert [(m.values, m.step, m.epoch) for m in metrics] == [((("train/loss", 0.5),), 100, 11.0)]
    assert f"{root}/gpu.csv: {CUT}" in reader.warnings
    assert f"{root}/metrics.csv: {CUT}" in reader.warnings


@pytest.mark.parametrize("quoted", [False, True], ids=["plain", "quoted"])
def test_the_summary_drops_it(tmp_path: Path, quoted: bool) -> None:
    root = session(tmp_path, quoted)
    data = summarize(root).data
    [gpu] = data["gpus"]
    assert (gpu["peak_mem_bytes"], gpu["peak_at"]) == (4 * GIB, T0)
    stats = {row["key"]: row for row in data["stats"]}
    assert stats["gpu0/mem_peak (GiB)"]["count"] == 3
    [task] = data["tasks"]
    assert task["epochs"] == {"first": 11, "last": 11}
    assert task["metrics"]["train/loss"]["count"] == 1
    assert data["warnings"] == [f"{root}/gpu.csv: {CUT}", f"{root}/metrics.csv: {CUT}"]

"""A session directory as pandas frames for summaries, read by the one session reader.

`collectors.session.session_reader.SessionReader` checks `meta.json` and the headers and reads the
events; `collectors.session.session_columns` reads the CSV columns with the same rules. So
`summarize`
refuses, skips and counts exactly what `--replay` does.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from collectors.session.rows import RowError
from collectors.session.session_columns import read_columns
from collectors.session.session_format import (
    CONTAINERS_FILE,
    GPU_FILE,
    HOST_FILE,
    META,
    METRICS_FILE,
)
from collectors.session.session_reader import SessionReader

__all__ = ["SessionFrames", "load_frames"]

GPU_NUMERIC = (
    "t",
    "gpu",
    "mem_used_bytes",
    "mem_total_bytes",
    "util_gpu_pct",
    "util_mem_pct",
    "temp_c",
    "power_w",
    "mem_peak_bytes",
)
HOST_NUMERIC = ("t", "cpu_pct", "mem_used_bytes", "mem_total_bytes")
METRICS_NUMERIC = ("t", "line", "value", "step", "epoch")
CONTAINER_NUMERIC = ("t", "cpu_pct", "mem_used_bytes", "mem_limit_bytes", "gpu_mem_bytes")
NAMED_ROWS = 256
"""How many `gpu.csv` rows are read for GPU names (the first rows name every GPU)."""


@dataclass
class SessionFrames:
    """Everything a summary needs from one session directory."""

    directory: Path
    meta: dict[str, Any]
    gpu: pd.DataFrame
    """`gpu.csv` numeric columns (float64); absent optional columns are all-NaN."""
    gpu_names: dict[int, tuple[str, str]]
    """GPU index -> (uuid, name)."""
    host: pd.DataFrame | None
    metrics: pd.DataFrame | None
    events: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    """What the reader skipped or doubted, and said so (a cut-short last line, bad lines)."""
    containers: pd.DataFrame | None = None
    """`containers.csv`: the numeric columns, and `id`, `name`, `image` as categories."""


def _gpu_names(reader: SessionReader) -> dict[int, tuple[str, str]]:
    names: dict[int, tuple[str, str]] = {}
    for gpu in reader.meta.get(META.gpus) or ():
        names[gpu["index"]] = (str(gpu.get("uuid") or ""), str(gpu.get("name") or ""))
    from collectors.session.row_decoders import GpuRowDecoder  # the replay's decoding of a row

    with closing(reader.open_csv(GPU_FILE)) as stream:
        decoder = GpuRowDecoder(stream.header)
        for number, (_, row) in enumerate(stream):
            if number >= NAMED_ROWS:
                break
            try:
                sample = decoder.sample(row, None)
            except RowError:
                continue
            names.setdefault(sample.index, (sample.uuid, sample.name))
    return names


def load_frames(directory: str | os.PathLike[str]) -> SessionFrames:
    """Read a session directory; raises `SessionError` or `SessionFormatError`.

    The CSV files are read on a small thread pool: pandas' C parser releases the GIL while it
    tokenizes, so on a multi-core machine `gpu.csv` and `metrics.csv` parse side by side.
    """
    reader = SessionReader(directory)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="summary-read") as pool:
        gpu_job = pool.submit(read_columns, reader, GPU_FILE, GPU_NUMERIC)
        host_job = pool.submit(read_columns, reader, HOST_FILE, HOST_NUMERIC)
        metrics_job = pool.submit(read_columns, reader, METRICS_FILE, METRICS_NUMERIC)
        containers_job = pool.submit(read_columns, reader, CONTAINERS_FILE, CONTAINER_NUMERIC)
        gpu, host, metrics = gpu_job.result(), host_job.result(), metrics_job.result()
        containers = containers_job.result()
    assert gpu is not None  # the reader refuses a session without gpu.csv
    events = list(reader.events())
    names = _gpu_names(reader)
    return SessionFrames(
        reader.directory,
        reader.meta,
        gpu,
        names,
        host,
        metrics,
        events,
        reader.warnings,
        containers,
    )

"""Read a session directory into pandas frames, tolerating a crash-truncated last line."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.rows import SessionFormatError
from collectors.session_reader import read_meta
from gpuherd.record.logsink import METRICS_COLUMNS  # noqa: F401  (the format's columns live with the writer)

TAIL_BYTES = 1 << 20
CHECK_CHUNK_BYTES = 4 << 20
"""How far from the end of a file to look for the last complete line."""

GPU_NUMERIC = ("t", "gpu", "mem_used_bytes", "mem_total_bytes", "util_gpu_pct", "util_mem_pct",
               "temp_c", "power_w", "mem_peak_bytes")
HOST_NUMERIC = ("t", "cpu_pct", "mem_used_bytes", "mem_total_bytes")
METRICS_NUMERIC = ("t", "line", "value", "step", "epoch")
METRICS_TEXT = ("task", "metric")
"""Columns of `metrics.csv`, in file order."""


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
    """Things the reader skipped and said so about (a truncated last line, a missing file)."""


class _Limited(io.RawIOBase):
    """The first `limit` bytes of a file, so pandas never sees a truncated last line."""

    def __init__(self, raw: io.BufferedReader, limit: int) -> None:
        self._raw = raw
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)[: self._left]
        n = self._raw.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _complete_end(path: Path, warnings: list[str]) -> tuple[int, list[str]]:
    """Byte length of the file without a bad last line, and its header cells."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        header_line = f.readline()
        if not header_line.endswith(b"\n"):
            warnings.append(f"{path.name}: no complete header line; file ignored")
            return 0, []
        header = next(csv.reader([header_line.decode("utf-8", "replace")]))
        start = max(len(header_line), size - TAIL_BYTES)
        f.seek(start)
        tail = f.read()
    end = size
    if tail and not tail.endswith(b"\n"):
        cut = tail.rfind(b"\n")
        end = start + cut + 1 if cut >= 0 else len(header_line)
        warnings.append(f"{path.name}: dropped a truncated last line")
    body = tail[: end - start]
    if body:
        last_start = body.rstrip(b"\n").rfind(b"\n") + 1
        last = body[last_start:].decode("utf-8", "replace")
        cells = next(csv.reader([last.rstrip("\r\n")]), [])
        if len(cells) != len(header):
            end = start + last_start
            warnings.append(f"{path.name}: dropped a last line with {len(cells)} of "
                            f"{len(header)} cells")
    return end, header


def check_cell_counts(path: Path, end: int, cells: int) -> None:
    """Raise `SessionFormatError` naming the first line (within `end` bytes) with a wrong count.

    pandas silently ignores extra cells when reading selected columns, so the count is checked
    here, chunk by chunk: a chunk whose commas add up to `cells - 1` per line and that holds no
    quote passes at C speed; any other chunk is checked line by line (numpy, then the csv module
    for lines with quotes, where a comma may sit inside a cell).
    """
    line_no = 0  # number of the last complete line before the chunk
    with open(path, "rb") as f:
        carry = b""
        read = 0
        while read < end:
            block = f.read(min(CHECK_CHUNK_BYTES, end - read))
            if not block:
                break
            read += len(block)
            data = carry + block
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            lines = data.count(b"\n")
            if data.count(b",") != lines * (cells - 1) or b'"' in data:
                bad = _bad_lines(data, cells)
                if bad is not None:
                    raise SessionFormatError(f"expected {cells} cells", str(path), line_no + bad)
            line_no += lines


def _bad_lines(data: bytes, cells: int) -> int | None:
    """1-based index (within `data`) of the first line with a wrong cell count, or `None`."""
    arr = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    commas = np.flatnonzero(arr == 44)
    per_line = np.diff(np.searchsorted(commas, ends), prepend=0) + 1
    for index in np.flatnonzero(per_line != cells):
        start = 0 if index == 0 else int(ends[index - 1]) + 1
        line = data[start: int(ends[index])].decode("utf-8", "replace").rstrip("\r")
        if '"' in line and len(next(csv.reader([line]), [])) == cells:
            continue
        return int(index) + 1
    return None


def read_csv(
    path: Path,
    numeric: tuple[str, ...],
    text: tuple[str, ...] = (),
    required: tuple[str, ...] = ("t",),
    warnings: list[str] | None = None,
) -> pd.DataFrame | None:
    """Read the wanted columns of one session CSV; `None` when the file does not exist.

    Columns in `numeric` that the file lacks come back as all-NaN, so callers need not check.
    Raises `SessionFormatError` naming the file and line for a malformed line before the last.
    """
    warnings = [] if warnings is None else warnings
    if not path.exists():
        return None
    end, header = _complete_end(path, warnings)
    if not header:
        return None
    missing = [c for c in required if c not in header]
    if missing:
        raise SessionFormatError(f"missing required column(s): {', '.join(missing)}",
                                 str(path), 1)
    check_cell_counts(path, end, len(header))
    dtypes: dict[str, Any] = {c: "float64" for c in numeric if c in header}
    dtypes.update({c: "category" for c in text if c in header})
    source = io.BufferedReader(_Limited(open(path, "rb"), end))  # noqa: SIM115
    try:
        frame = pd.read_csv(source, usecols=list(dtypes), dtype=dtypes, engine="c")
    except pd.errors.ParserError as error:
        raise SessionFormatError(str(error).replace("Error tokenizing data. C error: ", ""),
                                 str(path), _line_of(str(error))) from None
    except ValueError as error:
        raise SessionFormatError(str(error), str(path),
                                 _first_bad_line(path, header, numeric)) from None
    finally:
        source.close()
    for column in numeric:
        if column not in frame:
            frame[column] = math.nan
    return frame


def _line_of(message: str) -> int | None:
    words = message.replace(",", " ").split()
    for i, word in enumerate(words[:-1]):
        if word == "line" and words[i + 1].isdigit():
            return int(words[i + 1])
    return None


def _first_bad_line(path: Path, header: list[str], numeric: tuple[str, ...]) -> int | None:
    # Only on the error path: find the line pandas would not convert, to name it.
    where = [i for i, c in enumerate(header) if c in numeric]
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if number == 1:
                continue
            for i in where:
                if i < len(row) and row[i] != "":
                    try:
                        float(row[i])
                    except ValueError:
                        return number
    return None


def read_jsonl(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    """Read `events.jsonl`; a truncated last line is dropped with a warning."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()
        warnings.append(f"{path.name}: dropped a truncated last line")
    events = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
        except ValueError as error:
            raise SessionFormatError(f"not JSON: {error}", str(path), number) from None
        if not isinstance(event, dict):
            raise SessionFormatError("expected a JSON object", str(path), number)
        events.append(event)
    return events


def _gpu_names(directory: Path, meta: dict[str, Any]) -> dict[int, tuple[str, str]]:
    names: dict[int, tuple[str, str]] = {}
    for gpu in meta.get("gpus") or ():
        if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
            names[gpu["index"]] = (str(gpu.get("uuid") or ""), str(gpu.get("name") or ""))
    path = directory / "gpu.csv"
    if path.exists():
        # The first rows name every GPU; reading only them keeps strings out of the big frame.
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            for number, row in enumerate(reader):
                if number > 256:
                    break
                try:
                    index = int(float(row.get("gpu") or ""))
                except ValueError:
                    continue
                names.setdefault(index, (row.get("uuid") or "", row.get("name") or ""))
    return names


def load_frames(directory: str | os.PathLike[str]) -> SessionFrames:
    """Read a session directory; raises `SessionError` or `SessionFormatError`.

    The CSV files are read on a small thread pool: pandas' C parser releases the GIL while it
    tokenizes, so on a multi-core machine `gpu.csv` and `metrics.csv` parse side by side.
    """
    root = Path(directory)
    meta = read_meta(root)
    notes: dict[str, list[str]] = {name: [] for name in ("gpu", "host", "metrics")}
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="summary-read") as pool:
        gpu_job = pool.submit(read_csv, root / "gpu.csv", GPU_NUMERIC,
                              required=("t", "gpu", "mem_used_bytes"), warnings=notes["gpu"])
        host_job = pool.submit(read_csv, root / "host.csv", HOST_NUMERIC,
                               warnings=notes["host"])
        metrics_job = pool.submit(read_csv, root / "metrics.csv", METRICS_NUMERIC, METRICS_TEXT,
                                  required=("t", "task", "metric", "value"),
                                  warnings=notes["metrics"])
        gpu, host, metrics = gpu_job.result(), host_job.result(), metrics_job.result()
    warnings = [w for name in ("gpu", "host", "metrics") for w in notes[name]]
    if gpu is None:
        warnings.append("gpu.csv: missing; no GPU figures")
        gpu = pd.DataFrame({c: pd.Series(dtype="float64") for c in GPU_NUMERIC})
    events = read_jsonl(root / "events.jsonl", warnings)
    return SessionFrames(root, meta, gpu, _gpu_names(root, meta), host, metrics, events, warnings)

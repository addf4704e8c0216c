"""Columns of a session CSV for summaries: the session reader's rules, at pandas' speed.

A summary of a day of 8 GPUs reads 700,000 rows; cell by cell in Python that takes seconds.
Here a file is read in chunks of whole lines. A chunk that is plain (no quote, carriage return
or NUL byte, valid UTF-8, the header's number of commas on every line) is one record per line,
exactly as the streaming reader would split it, so pandas' C parser reads it and the rules of
`collectors.session.cells` are applied to whole columns: the same ranges, the same rows skipped, the
same bad cells counted (the first of each is re-read cell by cell, for the same words). pandas
reads a number only where Python's `float()` gives the same value; a chunk it will not convert,
and any chunk that is not plain, goes through the streaming reader (`CsvStream.records`) and the
same decoding as `--replay`. So `summarize` and `--replay` accept and skip the same rows.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from collectors.replay.replay_metrics import MetricRowDecoder
from collectors.session import cells
from collectors.session.container_rows import CONTAINER_CELLS, ID_LENGTH, ContainerRowDecoder
from collectors.session.row_decoders import CELLS, KEYS, RowCells
from collectors.session.rows import RowError, column_index
from collectors.session.session_csv import CsvStream
from collectors.session.session_format import CONTAINERS_FILE, METRICS_FILE
from collectors.session.session_reader import SessionReader

CHUNK_BYTES = 4 << 20
TEXT_COLUMNS = {METRICS_FILE: ("task", "metric"), CONTAINERS_FILE: ("id", "name", "image")}
"""The text columns a summary reads (as categories)."""
CELLS_OF = {**CELLS, CONTAINERS_FILE: CONTAINER_CELLS}
KEYS_OF = {**KEYS, CONTAINERS_FILE: {"t": cells.TIME}}
"""Rules per file; a container row's other key, its `id`, is text (checked apart)."""
_BOOL = cells.CellRule(0, 1, whole=True)
"""`1`/`0` cells as numbers; words (`true`) are not numbers to pandas and take the slow path."""


class _File:
    """One file being read into columns: its rules, and the parts read so far."""

    def __init__(self, stream: CsvStream, name: str, wanted: Sequence[str]) -> None:
        self.stream, self.name, self.tally = stream, name, stream.tally
        self.where = column_index(stream.header)
        self.wanted = [c for c in wanted if c in self.where]
        self.metrics = name == METRICS_FILE
        self.containers = name == CONTAINERS_FILE
        self.decoder: Any = (
            MetricRowDecoder(stream.header, str(stream.path))
            if self.metrics
            else ContainerRowDecoder(stream.header)
            if self.containers
            else RowCells(stream.header, name)
        )
        table = {col: kind for col, (_, kind) in CELLS_OF[name].items()}
        if self.metrics:
            table["value"] = cells.VALUE
        rules = [(c, _BOOL if k == "bool" else k) for c, k in table.items() if c in self.where]
        self.keys = [(self.where[c], c, rule) for c, rule in KEYS_OF[name].items()]
        self.checks = [(self.where[c], c, r) for c, r in rules if isinstance(r, cells.CellRule)]
        self.rule = {c: r for _, c, r in self.keys + self.checks}
        self.texts = [c for c in TEXT_COLUMNS.get(name, ()) if c in self.where]
        self.parts: list[dict[str, np.ndarray]] = []

    def scalar(self, line: int, row: list[str]) -> dict[str, Any] | None:
        """One record decoded as the streaming reader does; `None` when it is skipped."""
        try:
            if self.metrics:
                r = self.decoder.row(line, row, self.tally)
                return {
                    "t": r.t,
                    "task": r.task,
                    "line": r.line,
                    "metric": r.metric,
                    "value": r.value,
                    "step": r.step,
                    "epoch": r.epoch,
                }
            if self.containers:
                return self.decoder.columns(self.decoder.row(line, row, self.tally))
            keys = self.decoder.keys(row)
            values = self.decoder.values(row, line, self.tally)
        except RowError as error:
            self.tally.skip(line, str(error))
            return None
        fields = self.decoder.field_of
        return {c: keys[c] if c in keys else values[fields[c]] for c in self.wanted}


def read_columns(reader: SessionReader, name: str, wanted: Sequence[str]) -> pd.DataFrame | None:
    """The valid rows of file `name` as a frame; `None` when the session has no such file.

    `wanted` numeric columns come as float64 (NaN for `None`; a column the file lacks is all
    NaN), and for `metrics.csv` `task` and `metric` as categories too. Skipped rows, bad cells
    and a cut-short last line go to the reader's tally of the file, as in a replay.
    """
    if name not in reader.headers:
        return None
    stream = reader.open_csv(name)
    try:
        file = _File(stream, name, wanted)
        _read(file, stream.data_start)
    finally:
        stream.close()
    return _frame(file, wanted)


def _read(file: _File, start: int) -> None:
    with open(file.stream.path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        pos, line = start, 2
        while pos < size:
            f.seek(pos)
            data = f.read(CHUNK_BYTES)
            cut = data.rfind(b"\n") + 1
            if (
                cut
                and _plain(data[:cut], len(file.stream.header))
                and _fast(file, data[:cut], line)
            ):
                pos, line = pos + cut, line + data.count(b"\n", 0, cut)
            elif not cut and len(data) < CHUNK_BYTES:
                file.tally.cut = True  # all that is left is a line without a newline
                return
            else:
                pos, line = _slow(file, pos, line, pos + max(cut, 1))


def _plain(data: bytes, width: int) -> bool:
    if width < 2 or b'"' in data or b"\r" in data or b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    arr = np.frombuffer(data, dtype=np.uint8)
    commas = np.searchsorted(np.flatnonzero(arr == 44), np.flatnonzero(arr == 10))
    return bool((np.diff(commas, prepend=0) == width - 1).all())


_ROUND_TRIP_PROBE = 5.809830298062007e-168
_float_options: dict[str, str] | None = None


def _exact_floats() -> dict[str, str]:
    """read_csv options under which pandas reads every number as Python's `float()` does.

    pandas before 3.1 reads some 17-digit values (such as the probe) one unit off in the last
    place with its default parser, and the two readers must agree to the bit; there its
    round-trip parser is exact. Newer pandas is exact by default and deprecates the option.
    """
    global _float_options
    if _float_options is None:
        probe = pd.read_csv(
            io.BytesIO(repr(_ROUND_TRIP_PROBE).encode()),
            header=None,
            dtype={0: "float64"},
            engine="c",
        )[0].iloc[0]
        _float_options = {} if probe == _ROUND_TRIP_PROBE else {"float_precision": "round_trip"}
    return _float_options


def _fast(file: _File, data: bytes, line: int) -> bool:
    """Read a plain chunk with pandas; False when a cell is text pandas will not convert.

    Without pandas' default NA words, a `nan` cell is such text: its chunk is read row by row,
    where the cell rules count it as bad. Infinities pandas reads, and counts as bad here.
    """
    dtypes: dict[int, Any] = {at: "float64" for at, _, _ in file.keys + file.checks}
    dtypes.update({file.where[c]: "object" for c in file.texts})
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            header=None,
            usecols=sorted(dtypes),
            dtype=dtypes,
            keep_default_na=False,
            na_values=[""],
            engine="c",
            **_exact_floats(),
        )
    except (ValueError, pd.errors.ParserError):
        return False
    keep = np.ones(len(frame), dtype=bool)
    for at, _, rule in file.keys:
        keep &= _valid(frame[at].to_numpy(), rule)
    if file.metrics:  # an empty value, task or metric (pandas reads "" as missing)
        for column in ("value", *file.texts):
            keep &= frame[file.where[column]].notna().to_numpy()
    if file.containers:  # an id too short to be one, as the decoder says
        ids = frame[file.where["id"]].fillna("").astype(str).str.strip()
        frame[file.where["id"]] = ids
        keep &= (ids.str.len() >= ID_LENGTH).to_numpy()
    _count(file, data, line, ~keep, file.tally.first_skip is None, "skipped")
    bad = np.zeros(len(frame), dtype=np.int64)
    for at, _, rule in file.checks:
        values = frame[at].to_numpy()
        if rule is not cells.VALUE:
            bad += keep & ~np.isnan(values) & ~_valid(values, rule)  # infinities too
    _count(file, data, line, bad, file.tally.first_bad_cell is None, "bad_cells")
    out = {}
    for column in file.wanted:
        values = frame[file.where[column]].to_numpy(dtype=float)[keep]
        rule = file.rule[column]
        out[column] = (
            values if rule is cells.VALUE else np.where(_valid(values, rule), values, np.nan)
        )
    for column in file.texts:
        out[column] = _texts(file, frame[file.where[column]].to_numpy()[keep])
    file.parts.append(out)
    file.tally.reached = line + len(frame) - 1
    return True


def _texts(file: _File, values: np.ndarray) -> Any:
    # A day of 20 containers repeats 20 ids 1.7 million times: categories per chunk keep
    # their memory to codes (metrics.csv keeps its older, equivalent way).
    return pd.Categorical(values) if file.containers else values


def _valid(values: np.ndarray, rule: cells.CellRule) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(values) & (values >= rule.lo) & (values <= rule.hi)
        if rule.whole:
            inside = np.where(ok, values, 0.0)
            ok &= np.floor(inside) == inside
    return ok


def _count(
    file: _File, data: bytes, line: int, per_row: np.ndarray, first: bool, what: str
) -> None:
    """Add the skipped rows (or bad cells) of a chunk to the tally.

    The first one of the file is counted by decoding its row as the streaming reader does, so
    the warning has the same words.
    """
    total = int(per_row.sum())
    if not total:
        return
    if not first:
        setattr(file.tally, what, getattr(file.tally, what) + total)
        return
    row = int(np.flatnonzero(per_row)[0])
    setattr(file.tally, what, getattr(file.tally, what) + total - int(per_row[row]))
    file.scalar(line + row, _line_cells(data, row))


def _line_cells(data: bytes, index: int) -> list[str]:
    start = 0
    for _ in range(index):
        start = data.index(b"\n", start) + 1
    return data[start : data.index(b"\n", start)].decode("utf-8").split(",")


def _slow(file: _File, pos: int, line: int, stop: int) -> tuple[int, int]:
    rows = [
        r
        for number, row in file.stream.records(pos, line, stop)
        if (r := file.scalar(number, row)) is not None
    ]
    out = {
        c: np.array([np.nan if r[c] is None else float(r[c]) for r in rows], dtype=float)
        for c in file.wanted
    }
    for column in file.texts:
        out[column] = _texts(file, np.array([r[column] for r in rows], dtype=object))
    file.parts.append(out)
    assert file.stream.resume is not None
    return file.stream.resume


def _frame(file: _File, wanted: Sequence[str]) -> pd.DataFrame:
    rows = sum(len(p["t"]) for p in file.parts)
    data: dict[str, Any] = {}
    for column in wanted:
        if column in file.wanted and file.parts:
            data[column] = np.concatenate([p[column] for p in file.parts])
        else:
            data[column] = np.full(rows, np.nan)
    for column in file.texts:
        parts = [p[column] for p in file.parts]
        if file.containers and parts:
            data[column] = union_categoricals(parts)
        else:
            data[column] = pd.Categorical(np.concatenate(parts) if parts else [])
    return pd.DataFrame(data)

"""Pure conversions between samples and session CSV rows (collectors/session/rows.py, ...)."""

from __future__ import annotations

import pytest

from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from collectors.session import cells
from collectors.session.row_decoders import GpuRowDecoder, HostRowDecoder, ProcessRowDecoder
from collectors.session.rows import (
    RowError,
    SessionFormatError,
    cell,
    gpu_rows,
    host_row,
    process_rows,
)
from collectors.session.session_format import GPU_COLUMNS, HOST_COLUMNS, PROCESS_COLUMNS

FULL = GpuSample(
    index=3,
    uuid="GPU-full",
    name="NVIDIA H100 80GB HBM3",
    memory_used_bytes=1 << 34,
    memory_total_bytes=85899345920,
    memory_reserved_bytes=644874240,
    gpu_util_pct=87.0,
    mem_util_pct=12.5,
    temperature_c=61.0,
    power_w=412.33,
    power_limit_w=700.0,
    sm_clock_mhz=1980,
    mem_clock_mhz=2619,
    fan_pct=None,
    pstate=0,
    ecc_errors_corrected=2,
    ecc_errors_uncorrected=0,
    mig_mode=False,
    processes=(GpuProcess(100, 1 << 33), GpuProcess(101, None, "graphics")),
)
LOST = GpuSample(index=4, uuid="GPU-lost", name="NVIDIA H100 80GB HBM3", error="GPU is lost")
TICK = GpuTick(1764130000.25, (FULL, LOST))


def as_dict(columns, row):
    assert len(row) == len(columns)
    return dict(zip(columns, row, strict=True))


def test_gpu_rows_write_every_column_and_none_as_empty():
    rows = gpu_rows(TICK, {"GPU-full": (1 << 34) + 5})
    full, lost = (as_dict(GPU_COLUMNS, r) for r in rows)
    assert full["t"] == "1764130000.25" and full["gpu"] == "3"
    assert full["mem_used_bytes"] == str(1 << 34) and full["power_w"] == "412.33"
    assert full["fan_pct"] == "" and full["mig_mode"] == "0"
    assert full["mem_peak_bytes"] == str((1 << 34) + 5)
    assert full["process_count"] == "2" and full["error"] == ""
    assert lost["mem_used_bytes"] == "" and lost["process_count"] == ""
    assert lost["mem_peak_bytes"] == "" and lost["error"] == "GPU is lost"


def test_process_rows_join_host_details_by_pid():
    details = {100: ProcessInfo(100, user="bob", command='python -c "a,b"', container="c0ffee")}
    rows = [as_dict(PROCESS_COLUMNS, r) for r in process_rows(TICK, details)]
    assert [r["pid"] for r in rows] == ["100", "101"]
    assert rows[0]["user"] == "bob" and rows[0]["command"] == 'python -c "a,b"'
    assert rows[0]["container"] == "c0ffee" and rows[0]["kind"] == "compute"
    assert rows[1]["user"] == "" and rows[1]["used_bytes"] == "" and rows[1]["kind"] == "graphics"


def test_gpu_row_round_trip_through_the_decoder():
    decoder = GpuRowDecoder(GPU_COLUMNS)
    rows = gpu_rows(TICK)
    assert decoder.t(rows[0]) == TICK.taken_at
    assert decoder.sample(rows[0], FULL.processes) == FULL
    assert decoder.sample(rows[1], None) == LOST
    assert decoder.lists_processes(rows[0]) is True and decoder.lists_processes(rows[1]) is False


def test_host_row_round_trip():
    sample = HostSample(
        12.5,
        cpu_pct=3.25,
        cpu_count=64,
        mem_used_bytes=10,
        mem_total_bytes=20,
        load_1m=0.5,
        net_rx_bytes_s=None,
        disk_read_bytes_s=1e9,
    )
    row = host_row(sample)
    assert as_dict(HOST_COLUMNS, row)["net_rx_bytes_s"] == ""
    assert HostRowDecoder(HOST_COLUMNS).sample(row) == sample


def test_decoders_ignore_unknown_columns_and_accept_any_order():
    header = [
        "vendor",
        "power_w",
        "t",
        "uuid",
        "gpu",
        "name",
        "mem_used_bytes",
        "mem_total_bytes",
        "util_gpu_pct",
        "util_mem_pct",
        "temp_c",
    ]
    decoder = GpuRowDecoder(header)
    got = decoder.sample(
        ["acme", "70.5", "1.0", "GPU-x", "0", "A100", "5", "10", "", "1", "30"], None
    )
    assert got == GpuSample(
        0,
        "GPU-x",
        "A100",
        memory_used_bytes=5,
        memory_total_bytes=10,
        gpu_util_pct=None,
        mem_util_pct=1.0,
        temperature_c=30.0,
        power_w=70.5,
    )
    assert decoder.lists_processes(["x"] * len(header)) is None


def test_process_decoder_without_details_gives_no_host_info():
    decoder = ProcessRowDecoder(["t", "gpu", "pid", "used_bytes"])
    cells = ["1.0", "2", "77", ""]
    assert decoder.process(cells) == GpuProcess(77, None, "compute")
    assert decoder.info(cells) is None and decoder.gpu(cells) == 2


@pytest.mark.parametrize(
    ("text", "value"), [("", None), ("12", 12), ("12.0", 12), ("1e3", 1000), (" 7 ", 7)]
)
def test_counts_accept_whole_floats_and_read_not_available_as_none(text, value):
    assert cells.BYTES.read(text) == (value, False)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_a_count_that_is_not_finite_is_none_and_a_bad_cell(text):
    """No count is NaN or infinite: such a cell is read as N/A and named in the reader's notes."""
    assert cells.BYTES.read(text) == (None, True)


@pytest.mark.parametrize("text", ["12.5", "abc", "-3", "1e300", str(2**53)])
def test_counts_refuse_fractions_text_negatives_and_values_past_2_53(text):
    assert cells.BYTES.read(text) == (None, True)


def test_bool_cells_and_cell_formatting():
    assert cells.read_bool("1") == (True, False) and cells.read_bool("False") == (False, False)
    assert cells.read_bool("") == (None, False) and cells.read_bool("1.0") == (True, False)
    assert cells.read_bool("maybe") == (None, True)
    assert [cell(None), cell(True), cell(0.1), cell(7)] == ["", "1", "0.1", "7"]


class Tally:
    def __init__(self):
        self.bad = []

    def bad_cell(self, line, column, why):
        self.bad.append((line, column, why))


def test_a_bad_value_reads_as_none_and_is_counted_with_its_column():
    row = gpu_rows(TICK)[0]
    row[GPU_COLUMNS.index("temp_c")] = "hot"
    row[GPU_COLUMNS.index("util_gpu_pct")] = "-5"
    tally = Tally()
    sample = GpuRowDecoder(GPU_COLUMNS).sample(row, None, 7, tally)
    assert sample.temperature_c is None and sample.gpu_util_pct is None
    assert sample.memory_used_bytes == FULL.memory_used_bytes
    assert tally.bad == [
        (7, "util_gpu_pct", "'-5' is outside 0 to 100"),
        (7, "temp_c", "'hot' is not a number"),
    ]


@pytest.mark.parametrize("index", ["inf", "-1", "1.5", "", "x", "65536"])
def test_a_row_without_a_valid_gpu_index_cannot_be_placed(index):
    row = gpu_rows(TICK)[0]
    row[GPU_COLUMNS.index("gpu")] = index
    with pytest.raises(RowError, match="gpu"):
        GpuRowDecoder(GPU_COLUMNS).sample(row, None)


def test_only_the_key_columns_are_required_the_rest_read_as_none():
    decoder = GpuRowDecoder(["t", "gpu", "mem_used_bytes"])
    assert decoder.sample(["1.0", "2", "5"], None) == GpuSample(2, "GPU-2", "", memory_used_bytes=5)
    with pytest.raises(SessionFormatError, match="gpu") as info:
        GpuRowDecoder(["t", "uuid", "name"])
    assert info.value.line == 1 and info.value.title == "Session format"

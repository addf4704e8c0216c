"""Reading session directories: hand-made, cut short and corrupt ones (tests/data/sessions/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from collectors.samples import GpuProcess, ProcessInfo
from gpuherd.session.session import SessionFormatError, load_session

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"
COMMAND = 'python train.py --lr 0.1,0.01 --name "big"'


def test_hand_made_session_reads_with_unknown_columns_and_files_ignored():
    session = load_session(SESSIONS / "handmade")
    ticks = list(session.gpu_ticks())
    assert [t.taken_at for t in ticks] == [1764130000.0, 1764130001.0, 1764130002.0]
    assert all(t.driver_version == "580.159.04" for t in ticks)
    assert ticks[0].cuda_driver_version == "13.0"  # the driver's 13000, as people write it
    first, second = ticks[0].devices
    assert (first.uuid, first.memory_used_bytes, first.power_w) == ("GPU-aaaa", 644874240, 74.5)
    assert first.processes == ()  # processes.csv exists and lists nothing for GPU 0
    assert second.processes == (GpuProcess(4242, 20830000000),)
    assert ticks[1].devices[1].memory_used_bytes == 21474836480  # written as "21474836480.0"
    assert ticks[1].devices[1].power_w is None and ticks[1].devices[0].sm_clock_mhz is None
    assert ticks[2].devices[1].processes == (GpuProcess(4242, 22980000000), GpuProcess(5151, None))
    assert session.warnings == []


def test_hand_made_host_samples_get_details_from_the_next_listing():
    hosts = list(load_session(SESSIONS / "handmade").host_samples())
    assert [h.taken_at for h in hosts] == [1764130000.5, 1764130001.5]
    assert hosts[0].load_1m == 3.1 and hosts[1].load_1m is None
    # the host sample at .5 owns the listing written at the next GPU tick (1.0)
    assert hosts[0].processes == (ProcessInfo(4242, user="alice", command=COMMAND),)
    # the last one owns the listing at 2.0: pid 5151 has no host details and is left out
    assert hosts[1].processes == (
        ProcessInfo(4242, user="alice", command=COMMAND, container="trainer-1"),
    )


def test_events_are_read_in_order():
    events = list(load_session(SESSIONS / "handmade").events())
    assert [e["kind"] for e in events] == ["start", "some_future_kind"]


def test_truncated_last_line_is_dropped_with_a_warning():
    session = load_session(SESSIONS / "truncated_last_line")
    assert any("gpu.csv: dropped the last line" in w for w in session.warnings)
    ticks = list(session.gpu_ticks())
    assert [len(t.devices) for t in ticks] == [2, 2, 1]
    assert ticks[-1].devices[0].uuid == "GPU-aaaa"
    assert [e["kind"] for e in session.events()] == ["start"]
    assert any("events.jsonl: dropped the last line" in w for w in session.warnings)


def test_short_last_line_with_newline_is_dropped_with_a_warning():
    session = load_session(SESSIONS / "short_last_line")
    assert [len(t.devices) for t in session.gpu_ticks()] == [2, 2, 1]
    assert any("3 cells where the header has 12" in w for w in session.warnings)


def test_garbage_value_reads_as_none_and_is_counted_with_file_and_line():
    session = load_session(SESSIONS / "garbage_value")
    ticks = list(session.gpu_ticks())
    assert [len(t.devices) for t in ticks] == [2, 2, 2]
    assert ticks[1].devices[0].memory_used_bytes is None  # "64487x240"
    assert ticks[1].devices[0].memory_total_bytes == 150754820096
    assert session.warnings == [
        f"{SESSIONS}/garbage_value/gpu.csv: 1 bad cell read as N/A (first: line 4, "
        "mem_used_bytes: '64487x240' is not a number)"
    ]


def test_wrong_cell_count_in_the_middle_is_skipped_and_counted():
    session = load_session(SESSIONS / "wrong_cell_count")
    ticks = list(session.gpu_ticks())
    assert len(ticks) == 3
    assert session.warnings == [
        f"{SESSIONS}/wrong_cell_count/processes.csv: skipped 1 line that could not be read "
        "(first: line 3: 8 cells where the header has 7)"
    ]


def test_strict_check_names_the_first_file_with_a_problem():
    with pytest.raises(SessionFormatError, match=r"gpu\.csv: 1 bad cell .* line 4"):
        load_session(SESSIONS / "garbage_value").check()
    load_session(SESSIONS / "garbage_value").check(strict=False)  # only counted


def test_a_missing_measure_column_reads_as_na():
    session = load_session(SESSIONS / "missing_column")
    assert all(d.temperature_c is None for t in session.gpu_ticks() for d in t.devices)
    assert session.warnings == [f"{SESSIONS}/missing_column/gpu.csv: no temp_c column; read as N/A"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no_meta", r"no_meta: not a gpuherd session \(no meta\.json in it\)"),
        ("bad_meta", r"bad_meta/meta\.json:2: not valid JSON"),
        ("newer_schema", r"schema 2 is newer than this gpuherd reads \(1\)"),
    ],
)
def test_unusable_sessions_fail_at_load_with_the_file_named(case, message):
    with pytest.raises(SessionFormatError, match=message):
        load_session(SESSIONS / case)


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("[1, 2]", "must hold a JSON object"),
        ('{"schema": 1, "host": "h", "started_at": 1}', "missing required key.*driver"),
        ('{"schema": "1", "host": "h", "driver": null, "started_at": 1}', "'schema' must be"),
        ('{"schema": 1, "host": "h", "driver": null, "started_at": "now"}', "'started_at'"),
        ('{"schema": 1, "host": 5, "driver": null, "started_at": 1}', "'host' must be a string"),
    ],
)
def test_meta_validation(tmp_path, meta, message):
    shutil.copy(SESSIONS / "handmade" / "gpu.csv", tmp_path)
    (tmp_path / "meta.json").write_text(meta)
    with pytest.raises(SessionFormatError, match=message):
        load_session(tmp_path)


def test_missing_directory_and_missing_gpu_csv(tmp_path):
    with pytest.raises(SessionFormatError, match="no such directory"):
        load_session(tmp_path / "nope")
    shutil.copy(SESSIONS / "handmade" / "meta.json", tmp_path)
    with pytest.raises(SessionFormatError, match=r"gpu\.csv: missing"):
        load_session(tmp_path)


def test_empty_optional_file_is_ignored_but_empty_gpu_csv_is_an_error(tmp_path):
    for name in ("meta.json", "gpu.csv"):
        shutil.copy(SESSIONS / "handmade" / name, tmp_path)
    (tmp_path / "host.csv").write_text("")
    session = load_session(tmp_path)
    assert list(session.host_samples()) == []
    assert any("host.csv: empty, ignored" in w for w in session.warnings)
    assert all(t.devices[1].processes is None for t in session.gpu_ticks())  # no processes.csv
    (tmp_path / "gpu.csv").write_text("")
    with pytest.raises(SessionFormatError, match="no header line"):
        load_session(tmp_path)


def test_bad_json_line_in_the_middle_of_events_is_skipped_and_counted(tmp_path):
    shutil.copytree(SESSIONS / "handmade", tmp_path / "s")
    (tmp_path / "s" / "events.jsonl").write_text(
        '{"t": 1, "kind": "a"}\nnot json\n{"t": 2, "kind": "b"}\n{"kind": "c"}\n'
    )
    session = load_session(tmp_path / "s")
    assert [e["kind"] for e in session.events()] == ["a", "b"]
    assert session.warnings == [
        f"{tmp_path}/s/events.jsonl: skipped 2 lines that could not be read (first: line 2: "
        "not valid JSON (Expecting value, column 1))"
    ]


def test_files_saved_with_a_byte_order_mark_still_read(tmp_path):
    # spreadsheets save UTF-8 CSV with a BOM; without care the first column is "\ufefft"
    for name in ("meta.json", "gpu.csv", "events.jsonl"):
        data = (SESSIONS / "handmade" / name).read_bytes()
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + data)
    session = load_session(tmp_path)
    assert len(list(session.gpu_ticks())) == 3 and len(list(session.events())) == 2

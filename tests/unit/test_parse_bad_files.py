"""Bad files through `gpuherd parse`, run as a user runs it: one stderr line, no traceback,
unparsed lines counted, memory bounded; and arbitrary bytes through content detection."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuherd.common import exit_codes
from gpuherd.parse.parse_command import iter_lines
from parsers.registry import (
    DOCUMENT_FORMATS,
    FORMAT_NAMES,
    LATE_FORMATS,
    detect_format,
    detect_late_format,
    make_parser,
)

ROOT = Path(__file__).resolve().parents[2]


def parse(path: Path, *flags: str) -> tuple[int, list[dict], list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", *flags, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, records, done.stderr.splitlines()


def test_a_binary_file_is_one_clear_line(tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 400)
    status, records, err = parse(blob)
    assert (status, records) == (exit_codes.FAILED, [])
    assert err == [f"gpuherd parse: {blob}: no text lines (binary?)"]


def test_json_that_is_no_trainer_state_under_its_name_is_one_clear_line(tmp_path: Path) -> None:
    doc = tmp_path / "trainer_state.json"
    doc.write_text('{\n  "global_step": 8,\n  "best_metric": null\n}\n')
    status, records, err = parse(doc)
    assert (status, records) == (exit_codes.FAILED, [])
    assert err == [f"gpuherd parse: {doc}: trainer_state.json without a log_history list"]


def test_json_that_is_no_trainer_state_elsewhere_is_no_document(tmp_path: Path) -> None:
    doc = tmp_path / "config.json"
    doc.write_text('{\n  "n_layer": 2,\n  "vocab_size": 50257\n}\n')
    status, records, err = parse(doc)
    assert (status, records) == (exit_codes.OK, [])
    assert err == [
        f"gpuherd parse: {doc}: no metric and no finding in 4 text line(s), read as "
        "generic; --format names another format"
    ]


def test_a_csv_with_a_header_only_gives_nothing_and_no_error(tmp_path: Path) -> None:
    # a log not written yet: no failure, but one line says why nothing was printed
    log = tmp_path / "training.log"
    log.write_text("epoch,accuracy,loss,val_accuracy,val_loss\n")
    assert parse(log) == (
        exit_codes.OK,
        [],
        [
            f"gpuherd parse: {log}: no metric and no finding in 1 text line(s), read as csv; "
            "--format names another format"
        ],
    )


def test_a_trainer_state_with_an_empty_history_says_so(tmp_path: Path) -> None:
    doc = tmp_path / "trainer_state.json"
    doc.write_text('{\n  "global_step": 0,\n  "log_history": []\n}\n')
    assert parse(doc) == (
        exit_codes.OK,
        [],
        [f"gpuherd parse: {doc}: no log_history entry holds a metric (read as hf_trainer_state)"],
    )


def test_ragged_rows_are_counted_and_the_rows_around_them_kept(tmp_path: Path) -> None:
    log = tmp_path / "training.log"
    log.write_text("epoch,loss,val_loss\n0,1.5,1.6\n1,1.4,1.5,9,9\n2,1.3\n3,1.2,1.3\n")
    status, records, err = parse(log)
    assert status == exit_codes.OK
    got = [(r["line"], r["metric"], r["value"], r["epoch"]) for r in records]
    assert got == [
        (2, "train/loss", 1.5, 0),
        (2, "val/loss", 1.6, 0),
        (4, "train/loss", 1.3, 2),
        (5, "train/loss", 1.2, 3),
        (5, "val/loss", 1.3, 3),
    ]
    assert len(err) == 1
    assert err[0].startswith(f"gpuherd parse: {log}: 1 unparsed line(s) as csv; first at line 3")


def test_invalid_utf8_inside_a_csv_is_one_unparsed_cell(tmp_path: Path) -> None:
    log = tmp_path / "history.log"
    log.write_bytes(b"epoch,loss\n0,1.5\n1,\xff\xfe\n2,1.25\n")
    status, records, err = parse(log)
    assert status == exit_codes.OK
    assert [(r["line"], r["value"]) for r in records] == [(2, 1.5), (4, 1.25)]
    assert "1 unparsed line(s) as csv; first at line 3" in err[0]


def test_a_100_mb_line_without_a_newline_keeps_memory_bounded(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as handle:
        handle.write(b"step=1 loss=0.5\n")
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            handle.write(chunk)  # no newline at all: one line of 100 MiB that never ends
    # The child reports its own peak as VmHWM: ru_maxrss would count this pytest process's
    # memory too (Linux keeps it across fork and exec), RUSAGE_CHILDREN every earlier child's.
    measured = (
        "import sys\nfrom gpuherd.cli import main\nstatus = main(sys.argv[1:])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "sys.stderr.write('peak_kib=' + hwm.split()[1])\nsys.exit(status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measured, "parse", "--json", str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == exit_codes.OK
    assert [(r["line"], r["metric"], r["value"]) for r in records] == [(1, "train/loss", 0.5)]
    peak_kib = int(done.stderr.rsplit("peak_kib=", 1)[1])
    # the parse takes about 20 MiB here; holding the whole line would add 100
    assert peak_kib < 100 * 1024, peak_kib


def _lines_of(data: bytes) -> list[str]:
    return list(iter_lines(io.BytesIO(data)))


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=4096),
    st.sampled_from(["", "training.log", "x.csv", "log.txt", "trainer_state.json", "run.jsonl"]),
)
def test_arbitrary_bytes_through_detection(data: bytes, name: str) -> None:
    lines = _lines_of(data)
    detected = detect_format(lines, name or None)
    assert detected in FORMAT_NAMES
    late = detect_late_format(lines, name or None)
    assert late is None or late in LATE_FORMATS
    if detected in DOCUMENT_FORMATS:
        return
    parser = make_parser(detected)
    for line in lines:
        try:
            parser.feed(line)
        except ValueError:
            pass  # an unparsed line: counted, never anything else


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"epoch",
                b"step",
                b"loss",
                b",",
                b"\n",
                b"0.5",
                b"nan",
                b'{"',
                b'"log_history"',
                b"{",
                b"}",
                b":",
                b" ",
                b"\xff",
                b"\x00",
                b"NA",
                b'"',
                b"\r",
            ]
        ),
        max_size=60,
    )
)
def test_near_misses_of_csv_and_documents_through_detection(pieces: list[bytes]) -> None:
    lines = _lines_of(b"".join(pieces))
    detected = detect_format(lines, "training.log")
    assert detected in FORMAT_NAMES
    if detected not in DOCUMENT_FORMATS:
        parser = make_parser(detected)
        for line in lines:
            try:
                parser.feed(line)
            except ValueError:
                pass


def test_reading_the_head_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    from collectors.logs.logtail_formats import RegistryFormats

    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    assert RegistryFormats().document_format(str(fifo), None) is None

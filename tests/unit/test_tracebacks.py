"""A traceback ending in KeyboardInterrupt (Ctrl-C) is no `traceback` finding; others are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from collectors.logs.logtail import LogTailCollector

CTRL_C = """step=1 loss=2.0
step=2 loss=1.9
^CTraceback (most recent call last):
  File "/work/train.py", line 40, in <module>
    main()
  File "/work/train.py", line 31, in main
    loss.backward()
KeyboardInterrupt
"""
CRASH = """step=1 loss=2.0
Traceback (most recent call last):
  File "/work/train.py", line 31, in main
    x = model(batch)
        ^^^^^^^^^^^^
RuntimeError: shape mismatch
step=3 loss=1.8
"""


def tail_findings(path: Path) -> list[tuple[int, str]]:
    tail = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    found: list[tuple[int, str]] = []
    try:
        for _ in range(50):
            batch = tail.sample()
            found += [(line, f.kind) for line, f in batch.findings]
            if batch.size_bytes is not None and batch.offset_bytes >= batch.size_bytes:
                break
    finally:
        tail.close()
    return found


def parse_findings(path: Path) -> list[tuple[int, str]]:
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    records = [json.loads(line) for line in out.splitlines()]
    return [(r["line"], r["finding"]) for r in records if "finding" in r]


def test_a_ctrl_c_traceback_is_no_finding_in_the_tail_nor_in_parse(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(CTRL_C)
    assert tail_findings(log) == []
    assert parse_findings(log) == []


def test_another_traceback_is_found_at_its_first_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(CRASH)
    assert tail_findings(log) == [(2, "traceback")]
    assert parse_findings(log) == [(2, "traceback")]


def test_a_traceback_cut_off_at_the_end_of_the_file_is_still_found(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(CRASH.split("RuntimeError")[0])
    assert parse_findings(log) == [(2, "traceback")]


def test_a_traceback_spanning_two_reads_is_judged_at_its_end(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    head, rest = CTRL_C.split("    loss.backward()\n")
    log.write_text(head)
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    try:
        first = tail.sample()
        with log.open("a") as f:
            f.write(
                "    loss.backward()\n" + rest + "Traceback (most recent call last):\n"
                '  File "x.py", line 1\nValueError: bad\n'
            )
        found = list(first.findings)
        for _ in range(5):
            found += tail.sample().findings
    finally:
        tail.close()
    assert [(line, f.kind) for line, f in found] == [(9, "traceback")]

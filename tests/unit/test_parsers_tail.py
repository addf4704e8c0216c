"""Odd lines through the real log tail: each is one unparsed line and the tail goes on."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from collectors.logs.logtail import LogTailCollector
from collectors.replay.replay import SessionReplay
from collectors.samples import LogBatch

REPO = Path(__file__).resolve().parents[2]

BIG = b"1" + b"0" * 400  # an integer beyond a float's range


def _follow(path: Path) -> list[LogBatch]:
    """Every batch the tail gives for `path` until it has read everything."""
    tail = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    batches = []
    try:
        for _ in range(200):
            tail.wake()
            batch = tail.sample()
            batches.append(batch)
            if batch.offset_bytes == path.stat().st_size and not batch.lines_read:
                return batches
    finally:
        tail.close()
    raise AssertionError("the tail never reached the end of the file")


def _metrics(batches: list[LogBatch]) -> list[tuple[int, int | None, dict[str, float]]]:
    return [(n, m.step, m.as_dict()) for b in batches for n, m in b.metrics]


def test_odd_key_value_lines_are_counted_and_the_tail_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(
        b"\n".join(
            [
                b"step=1 loss=0.5",
                b"step=inf loss=1",
                b"step=1e309 loss=1",
                b"step=-1 loss=1",
                b"epoch=nan loss=1",
                b"lr=inf",
                b"step=" + BIG + b" loss=1",
                b"step=inf\x00 loss=\xff\xfe",
                b"step=9 loss=0.1 " + b"x" * (10 << 20),  # 10 MB: longer than the tail's line cap
                b"step=2 loss=0.25\n",
            ]
        )
    )
    batches = _follow(log)
    assert {b.format for b in batches} == {"generic"}
    # line 9 is cut at the line cap, as `gpuherd parse` cuts it: its head still holds a metric
    assert _metrics(batches) == [
        (1, 1, {"train/loss": 0.5}),
        (9, 9, {"train/loss": 0.1}),
        (10, 2, {"train/loss": 0.25}),
    ]
    assert sum(b.unparsed_lines for b in batches) == 7
    assert sum(b.too_long_lines for b in batches) == 1
    assert sum(b.lines_read for b in batches) == 10


def test_odd_json_lines_are_counted_and_the_tail_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "train.jsonl"
    log.write_bytes(
        b"\n".join(
            [
                b'{"step": 1, "loss": 0.5}',
                b'{"step": ' + BIG + b', "loss": 1}',  # OverflowError once: the tail stopped here
                b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b', "loss": 1}',  # RecursionError once
                b'{"step": NaN, "loss": 1}',
                b'{"step": 3, "lr": Infinity}',
                b'{"step": 3, "loss": 0.5}\x00',
                b'{"step": 3, "loss": \xff\xfe}',
                b'{"step": 4, "loss": ' + BIG + b"}",  # parses: an infinite loss, a finding
                b'{"step": 2, "loss": 0.25}\n',
            ]
        )
    )
    batches = _follow(log)
    assert {b.format for b in batches} == {"jsonl"}
    assert _metrics(batches) == [
        (1, 1, {"train/loss": 0.5}),
        (8, 4, {"train/loss": math.inf}),
        (9, 2, {"train/loss": 0.25}),
    ]
    assert [(n, f.kind) for b in batches for n, f in b.findings] == [(8, "inf")]
    assert sum(b.unparsed_lines for b in batches) == 6


def test_csv_bad_cells_through_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "history.csv"
    log.write_text(
        ",epoch,step,train_loss,lr\n"  # pandas `to_csv()`: an unnamed index
        "0,0,10,0.5,0.1\n"
        "1,1,20,tensor(1.2),0.1\n"  # an unparsed cell
        "2,2,30,None,0.1\n"  # a missing value
        "3,3,40,0.25,inf\n"  # an infinite learning rate: left out
        "4,4,50,0.125,0.01\n"
    )
    batches = _follow(log)
    assert _metrics(batches) == [
        (2, 10, {"train/loss": 0.5, "lr": 0.1}),
        (3, 20, {"lr": 0.1}),
        (4, 30, {"lr": 0.1}),
        (5, 40, {"train/loss": 0.25}),
        (6, 50, {"train/loss": 0.125, "lr": 0.01}),
    ]
    assert sum(b.unparsed_lines for b in batches) == 2


def test_a_recorded_pandas_csv_replays(tmp_path: Path) -> None:
    # `to_csv()` gave a metric with an empty name, recorded as such, and `--replay` then
    # refused the session the recorder itself wrote
    log = tmp_path / "history.csv"
    log.write_text(
        ",epoch,step,train_loss,lr\n0,0,10,0.5,0.1\n1,1,20,tensor(1.2),0.1\n2,2,30,0.25,0.05\n"
    )
    session = tmp_path / "session"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(session),
            "--duration",
            "2s",
            "--log",
            str(log),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split(",")[2:] for line in (session / "metrics.csv").read_text().splitlines()[1:]]
    assert rows == [
        ["2", "train/loss", "0.5", "10", "0.0"],
        ["2", "lr", "0.1", "10", "0.0"],
        ["3", "lr", "0.1", "20", "1.0"],
        ["4", "train/loss", "0.25", "30", "2.0"],
        ["4", "lr", "0.05", "30", "2.0"],
    ]
    replay = SessionReplay(session, check_all=True)  # raised SessionFormatError before
    assert replay.has_metrics
    tasks = json.loads((session / "meta.json").read_text())["tasks"]
    assert [(t["unparsed_lines"], t["metric_rows"]) for t in tasks] == [(1, 5)]

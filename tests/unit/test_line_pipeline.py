"""One line pipeline: `gpuherd parse` and the log tail cut the same bytes into the same lines.

`parse` reads a finished file with `read_lines`; the tail feeds whatever each read brought to
a `LineAssembler` and takes the newest `\\r` state of an unfinished line once per read. Both are
`collectors/logtail_lines.py`, so the same bytes give the same metrics, line by line.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from collectors.logtail import LogTailCollector
from collectors.logtail_lines import LineAssembler, read_lines
from gpuherd.parse_command import json_number, parse_file

ODD = b"".join([
    b"\x1b[32mINFO\x1b[0m step=1 loss=0.5 lr=0.001\r\n",  # 1: ANSI colour, CRLF
    b"\r".join(b"step=%d loss=0.%d" % (n, 99 - n) for n in range(10, 60)) + b"\n",  # 2: redraws
    b"\0\0\0\0step=2 loss=0.45\n",  # 3: the NUL hole a copytruncate leaves
    b"step=3 loss=0.4" + b" " * (100 << 10) + b"\n",  # 4: longer than the 64 KiB cap
    b"step=4 loss=\xff\xfe0.3 acc=0.5\n",  # 5: invalid UTF-8 in a value
    b"step=5 loss=0.25\x00 lr=0.1\n",  # 6: a NUL byte inside the line
    b"\n",  # 7: blank
    b"\rstep=60 loss=0.39\r" + b" " * 30 + b"\r\n",  # 8: redraws cleared by blanks: last state
    b"step=6 loss=0.2",  # 9: the last line, still unfinished
])


def _parse(path: Path) -> tuple[dict[int, Any], tuple[int, int]]:
    records: list[dict[str, Any]] = []
    report = parse_file(str(path), None, records.append)
    by_line: dict[int, Any] = {}
    for r in records:
        if "metric" in r:
            step, epoch, values = by_line.get(r["line"], (r.get("step"), r.get("epoch"), ()))
            by_line[r["line"]] = (step, epoch, (*values, (r["metric"], r["value"])))
    return by_line, (report.unparsed, report.cut_lines)


def _follow(path: Path, chunks: list[bytes]) -> tuple[dict[int, Any], int, int]:
    """Write `chunks` one by one under a tail; the last state of each line it reported."""
    path.write_bytes(b"")
    tail = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    got: dict[int, Any] = {}
    unparsed = too_long = 0
    try:
        with path.open("ab") as out:
            for chunk in chunks:
                out.write(chunk)
                out.flush()
                while True:
                    tail.wake()
                    batch = tail.sample()
                    unparsed += batch.unparsed_lines
                    too_long += batch.too_long_lines
                    for line_no, m in batch.metrics:
                        values = tuple((n, json_number(v)) for n, v in m.values)
                        epoch = None if m.epoch is None else json_number(m.epoch)
                        got[line_no] = (m.step, epoch, values)
                    if not tail._more:
                        break
    finally:
        tail.close()
    return got, unparsed, too_long


def test_odd_bytes_give_the_same_metrics_through_parse_and_the_tail(tmp_path: Path) -> None:
    finished = tmp_path / "finished.log"
    finished.write_bytes(ODD)
    parsed, parse_counts = _parse(finished)
    assert parse_counts == (0, 1)  # no line unparsed; line 4 cut
    assert parsed[1] == (1, None, (("train/loss", 0.5), ("lr", 0.001)))  # colour and CRLF gone
    assert parsed[2] == (59, None, (("train/loss", 0.4),))  # the newest redraw
    assert parsed[4] == (3, None, (("train/loss", 0.4),))  # the head of the cut line
    assert parsed[5] == (4, None, (("train/acc", 0.5),))  # the bad value alone is left out
    assert parsed[9] == (6, None, (("train/loss", 0.2),))  # the unfinished last line
    assert parsed[8] == (60, None, (("train/loss", 0.39),))
    assert sorted(parsed) == [1, 2, 3, 4, 5, 6, 8, 9]
    rng = random.Random(23)
    cuts = sorted(rng.sample(range(len(ODD)), 60))
    pieces = [ODD[i:j] for i, j in zip([0, *cuts], [*cuts, len(ODD)], strict=True)]
    for chunks in ([ODD], pieces):
        followed, unparsed, too_long = _follow(tmp_path / "live.log", chunks)
        assert 9 not in followed  # an unfinished line waits for its end while followed
        assert (unparsed, too_long) == parse_counts
        finished_later, _, _ = _follow(tmp_path / "ended.log", [*chunks, b"\n"])
        assert finished_later == parsed


# Arbitrary bytes, with the ones that matter to cutting lines made common: plain binary
# holds a `\n` once in 256 bytes and would hardly ever give a whole line longer than the cap.
LOG_BYTES = st.lists(st.one_of(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"\0", b" ", b"\xff", b"\xe2\x96", b"\x1b[32m",
                     b"step=2 loss=0.5 ", b"x" * 70]),
    st.binary(max_size=24),
), max_size=60).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(LOG_BYTES, st.data(), st.integers(8, 64))
@example(b"ab\r\0cd\n\r\r  \r\nxyz", None, 8)
def test_arbitrary_bytes_cut_anywhere_give_the_lines_of_one_whole_read(
    data: bytes, draw: Any, cap: int,
) -> None:
    whole = list(read_lines(io.BytesIO(data), LineAssembler(cap)))
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(data)), max_size=12))) if draw else []
    chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    # as the tail reads: each read's chunk, then the newest `\r` state of the unfinished line
    tail = LineAssembler(cap)
    last: dict[int, str] = {}
    for chunk in chunks:
        last.update(tail.feed(chunk))
        update = tail.take_update()
        if update is not None:
            last[update[0]] = update[1]
    last.update(tail.flush())
    assert last == dict(whole)
    # without updates taken, any chunking gives exactly the lines of one read
    plain = LineAssembler(cap)
    lines = [line for chunk in chunks for line in plain.feed(chunk)] + plain.flush()
    assert lines == whole
    assert all(len(text.encode("utf-8", "surrogatepass")) <= 3 * cap for _, text in whole)

"""One line pipeline: `gpuherd parse` and the log tail read the same bytes the same way.

Both cut lines with `collectors/logs/logtail_lines.py` (the tail feeds whatever each read brought
and takes the newest `\\r` state of an unfinished line once per read) and digest them with
`collectors/logtail_digest.LineDigest` (detection, late detection, tracebacks, findings), so a
file gives the same metrics and findings, line by line, whichever way it is read.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_digest import DETECT_LINES
from collectors.logs.logtail_lines import LineAssembler, read_lines
from gpuherd.parse.parse_command import json_number, parse_file
from gpuherd.parse.trends import TrendHistory

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
GOLDEN_LOGS = sorted(
    p
    for p in DATA.glob("*/*")
    if p.is_file()
    and not p.name.endswith(".expected.json")
    and p.parent.name != "make_logs"
    and p.suffix != ".md"
)

ODD = b"".join(
    [
        b"\x1b[32mINFO\x1b[0m step=1 loss=0.5 lr=0.001\r\n",  # 1: ANSI colour, CRLF
        b"\r".join(b"step=%d loss=0.%d" % (n, 99 - n) for n in range(10, 60)) + b"\n",  # 2: redraws
        b"\0\0\0\0step=2 loss=0.45\n",  # 3: the NUL hole a copytruncate leaves
        b"step=3 loss=0.4" + b" " * (100 << 10) + b"\n",  # 4: longer than the 64 KiB cap
        b"step=4 loss=\xff\xfe0.3 acc=0.5\n",  # 5: invalid UTF-8 in a value
        b"step=5 loss=0.25\x00 lr=0.1\n",  # 6: a NUL byte inside the line
        b"\n",  # 7: blank
        b"\rstep=60 loss=0.39\r" + b" " * 30 + b"\r\n",  # 8: redraws cleared by blanks: last state
        b"step=6 loss=0.2",  # 9: the last line, still unfinished
    ]
)


def _parse(path: Path) -> tuple[dict[int, Any], tuple[int, int]]:
    records: list[dict[str, Any]] = []
    report = parse_file(str(path), None, records.append)
    by_line: dict[int, Any] = {}
    for r in records:
        if "metric" in r:
            step, epoch, values = by_line.get(r["line"], (r.get("step"), r.get("epoch"), ()))
            by_line[r["line"]] = (step, epoch, (*values, (r["metric"], r["value"])))
    return by_line, (report.unparsed, report.cut_lines)


def _follow(
    path: Path,
    chunks: list[bytes],
    log_format: str | None = None,
    seen: dict[str, Any] | None = None,
) -> tuple[dict[int, Any], int, int]:
    """Write `chunks` one by one under a tail; the last state of each line it reported.

    `seen`, when given, gathers the tail's findings (`findings`, with the trend findings of
    its metrics judged as `parse` judges a whole file) and the formats it read (`formats`).
    """
    path.write_bytes(b"")
    tail = LogTailCollector(
        str(path), format=log_format, poll=True, poll_interval_s=0.01, settle_s=0
    )
    tail.open()
    got: dict[int, Any] = {}
    unparsed = too_long = 0
    history = TrendHistory()
    findings: list[tuple[int, str, str]] = []
    formats: set[str | None] = set()
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
                    findings += [(n, f.kind, f.evidence) for n, f in batch.findings]
                    formats |= {batch.format} if batch.metrics else set()
                    for line_no, m in batch.metrics:
                        values = tuple((n, json_number(v)) for n, v in m.values)
                        epoch = None if m.epoch is None else json_number(m.epoch)
                        got[line_no] = (m.step, epoch, values)
                        history.add(line_no, m)
                    if not tail._more:
                        break
    finally:
        tail.close()
    if seen is not None:
        findings += [(n, f.kind, f.evidence) for n, f in history.findings()]
        seen.update(findings=sorted(findings), formats=formats)
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
LOG_BYTES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                b"\n",
                b"\r",
                b"\r\n",
                b"\0",
                b" ",
                b"\xff",
                b"\xe2\x96",
                b"\x1b[32m",
                b"step=2 loss=0.5 ",
                b"x" * 70,
            ]
        ),
        st.binary(max_size=24),
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(LOG_BYTES, st.data(), st.integers(8, 64))
@example(b"ab\r\0cd\n\r\r  \r\nxyz", None, 8)
def test_arbitrary_bytes_cut_anywhere_give_the_lines_of_one_whole_read(
    data: bytes,
    draw: Any,
    cap: int,
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


def _parsed(path: Path, log_format: str | None = None) -> dict[str, Any]:
    """What `parse` gives: last metric per line, sorted findings, formats, counts."""
    records: list[dict[str, Any]] = []
    report = parse_file(str(path), log_format, records.append)
    by_line: dict[int, Any] = {}
    for r in records:
        if "metric" in r:
            step, epoch, values = by_line.get(r["line"], (r.get("step"), r.get("epoch"), ()))
            by_line[r["line"]] = (step, epoch, (*values, (r["metric"], r["value"])))
    findings = sorted((r["line"], r["finding"], r["evidence"]) for r in records if "finding" in r)
    formats = {r["format"] for r in records if "metric" in r}
    return {
        "metrics": by_line,
        "findings": findings,
        "formats": formats,
        "unparsed": report.unparsed,
        "format": report.format,
    }


def _pieces(data: bytes, seed: str, cuts: int = 40) -> list[bytes]:
    rng = random.Random(seed)
    at = sorted(rng.sample(range(len(data)), min(cuts, len(data))))
    return [data[i:j] for i, j in zip([0, *at], [*at, len(data)], strict=True)]


def _same_both_ways(
    log: Path, tmp_path: Path, chunks: list[bytes], log_format: str | None = None
) -> dict[str, Any]:
    """Parse `log` and follow it written in `chunks`; assert both gave the same; the parse."""
    parsed = _parsed(log, log_format)
    seen: dict[str, Any] = {}
    # a final newline ends an unfinished last line, which a tail waits for
    ended = b"" if log.read_bytes().endswith(b"\n") else b"\n"
    followed, unparsed, _ = _follow(tmp_path / log.name, [*chunks, ended], log_format, seen)
    assert followed == parsed["metrics"]
    assert seen["findings"] == parsed["findings"]
    assert seen["formats"] == parsed["formats"]
    assert unparsed == parsed["unparsed"]
    return parsed


@pytest.mark.parametrize("log", GOLDEN_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_log_gives_the_same_metrics_and_findings_parsed_and_followed(
    log: Path,
    tmp_path: Path,
) -> None:
    data = log.read_bytes()
    # a document (a trainer state) is rewritten whole, never appended to in pieces
    if log.suffix == ".json" and data.startswith(b"{"):
        chunks = [data]
    else:
        # The first read holds the lines detection settles on (a tail that opens a file being
        # written may see fewer: its detection is provisional then, see docs/parsers.md); the
        # rest comes in random pieces, cutting lines, bars and tracebacks anywhere.
        head = _after_line(data, DETECT_LINES)
        chunks = [data[:head], *_pieces(data[head:], log.name)]
    parsed = _same_both_ways(log, tmp_path, chunks)
    expected = json.loads(log.with_name(log.stem + ".expected.json").read_text())
    assert parsed["format"] == expected["format"]
    assert len(parsed["metrics"]) == len({m["line"] for m in expected["metrics"]})


def _after_line(data: bytes, count: int) -> int:
    """The offset just after line `count` of `data` (its end when it has fewer lines)."""
    end = -1
    for _ in range(count):
        end = data.find(b"\n", end + 1)
        if end < 0:
            return len(data)
    return end + 1


def _run_log(steps: int, loss: Any) -> str:
    return "".join(f"step={n} loss={loss(n)}\n" for n in range(1, steps + 1))


OOM = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in <module>\n'
    "    loss.backward()\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)
CTRL_C = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 12, in <module>\n'
    "    time.sleep(1)\n"
    "KeyboardInterrupt\n"
)


@pytest.mark.parametrize("where", ["whole", "pieces", "bytes"])
def test_findings_are_the_same_parsed_and_followed(where: str, tmp_path: Path) -> None:
    text = (
        _run_log(3, lambda n: 0.5)
        + "step=4 loss=nan\n"
        + CTRL_C
        + _run_log(400, lambda n: 1.0 + (n % 7) * 1e-4)
        + OOM
    )
    log = tmp_path / "run.log"
    log.write_text(text)
    data = text.encode()
    chunks = {
        "whole": [data],
        "pieces": _pieces(data, "findings", 80),
        "bytes": [data[i : i + 7] for i in range(0, len(data), 7)],
    }[where]
    (tmp_path / "tail").mkdir()
    parsed = _same_both_ways(log, tmp_path / "tail", chunks)
    kinds = [(n, kind) for n, kind, _ in parsed["findings"]]
    # NaN at its line; the Ctrl-C traceback (line 5) is no failure; the OOM traceback is told
    # at its first line and its error line; the flat loss stalls at the last line with a loss
    assert kinds == [(4, "nan"), (408, "stalled"), (409, "traceback"), (412, "oom")]


def test_a_format_that_shows_only_late_is_detected_the_same_way(tmp_path: Path) -> None:
    banners = "".join(f"[rank0] loading shard {n} of 300 from /data\n" for n in range(300))
    bars = "".join(
        f"Epoch 0: {n}%|###| {n}/100 [00:0{n % 10}<00:01, 9.50it/s, loss={1 / (n + 1):.4f}]\n"
        for n in range(1, 40)
    )
    text = banners + bars
    log = tmp_path / "late.log"
    log.write_text(text)
    (tmp_path / "tail").mkdir()
    parsed = _same_both_ways(log, tmp_path / "tail", _pieces(text.encode(), "late", 50))
    assert parsed["format"] == "tqdm" and parsed["formats"] == {"tqdm"}
    assert min(parsed["metrics"]) == 301 and len(parsed["metrics"]) == 39


TQDM_WITH_PLAIN = (
    "train:  10%|#         | 10/100 [00:01<00:09, 9.50it/s, loss=0.9]\n"
    "step=45 loss=nan\n"
    "val_acc=0.83\n"
    "train:  20%|##        | 20/100 [00:02<00:08, 9.50it/s, loss=0.8]\n"
)


def test_a_forced_format_with_plain_lines_gives_what_detection_gives(tmp_path: Path) -> None:
    log = tmp_path / "bars.log"
    log.write_text(TQDM_WITH_PLAIN)
    (tmp_path / "tail").mkdir()
    chunks = _pieces(TQDM_WITH_PLAIN.encode(), "forced", 20)
    forced = _same_both_ways(log, tmp_path / "tail", chunks, "tqdm")
    detected = _same_both_ways(log, tmp_path / "tail", chunks)
    assert forced == detected
    assert sorted(forced["metrics"]) == [1, 2, 3, 4]  # the plain lines 2 and 3 are read
    assert [(n, kind) for n, kind, _ in forced["findings"]] == [(2, "nan")]


@pytest.mark.parametrize("name", ["keras/verbose2.log", "sb3/ppo_breakout.log"])
def test_a_tail_that_sees_one_line_at_a_time_keeps_the_state_detection_comes_too_late_for(
    name: str,
    tmp_path: Path,
) -> None:
    # The first reads hold too few lines to settle the format; the parser chosen later is fed
    # the lines read before it (an `Epoch 1/3` header, a table's start) and reads the rest
    # with their state, as `parse` does.
    log = DATA / name
    lines = log.read_bytes().splitlines(keepends=True)
    _same_both_ways(log, tmp_path, lines)

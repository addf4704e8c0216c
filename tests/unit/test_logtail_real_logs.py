"""The real parsers behind the tail: every real log excerpt, followed while it is being written,
gives what parsing the finished file gives (the committed `.expected.json` next to it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
LOGS = sorted(
    p
    for p in DATA.glob("*/*")
    if p.is_file()
    and not p.name.endswith(".expected.json")
    and p.parent.name != "make_logs"
    and p.suffix != ".md"
    and p.name != "trainer_state.json"
)


def expected_of(log: Path) -> dict:
    return json.loads(log.with_name(log.stem + ".expected.json").read_text())


def record(line_no, metric, with_time):
    out = {"line": line_no, "values": [[n, v] for n, v in metric.values]}
    if metric.step is not None:
        out["step"] = metric.step
    if metric.epoch is not None:
        out["epoch"] = metric.epoch
    if with_time:
        out["taken_at"] = metric.taken_at
    return out


def normalise(value):
    return json.loads(
        json.dumps(value, allow_nan=True)
        .replace("NaN", '"nan"')
        .replace("-Infinity", '"-inf"')
        .replace("Infinity", '"inf"')
    )


def follow(log: Path, tmp_path: Path, chunks: list[bytes], log_format=None):
    target = tmp_path / log.name
    target.write_bytes(b"")
    tail = LogTailCollector(
        str(target), format=log_format, poll=True, poll_interval_s=0.01, settle_s=0
    )
    tail.open()
    batches = []
    with open(target, "ab") as out:
        for chunk in [*chunks, b""]:
            out.write(chunk)
            out.flush()
            while True:
                tail.wake()
                batches.append(tail.sample())
                if not tail._more:
                    break
    tail.close()
    return batches


def last_metric_per_line(batches, expected):
    timed = {m["line"] for m in expected["metrics"] if "taken_at" in m}
    got = {}
    for batch in batches:
        for line_no, metric in batch.metrics:
            got[line_no] = record(line_no, metric, line_no in timed)
    return {line_no: normalise(metric) for line_no, metric in got.items()}


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_finished_file_read_by_the_tail_matches_the_parse_command(log, tmp_path):
    expected = expected_of(log)
    batches = follow(log, tmp_path, [log.read_bytes()])
    assert {b.format for b in batches if b.metrics} <= {expected["format"]}
    got = last_metric_per_line(batches, expected)
    assert list(got.values()) == normalise(expected["metrics"])
    assert sum(b.unparsed_lines for b in batches) == len(expected["unparsed"])
    found = [(n, f.kind) for b in batches for n, f in b.findings]
    assert found == [(f["line"], f["finding"]) for f in expected["findings"]]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_log_written_in_random_pieces_gives_the_same_metrics(log, tmp_path):
    expected = expected_of(log)
    data = log.read_bytes()
    rng = random.Random(log.name)
    cuts = sorted(rng.sample(range(len(data)), min(40, len(data))))
    chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    batches = follow(log, tmp_path, chunks, log_format=expected["format"])
    got = last_metric_per_line(batches, expected)
    complete = data.count(b"\n")  # an unfinished last line waits for its end
    want = {m["line"]: m for m in normalise(expected["metrics"]) if m["line"] <= complete}
    # Progress bars may also report states of a line that was still being written; the
    # final state of every complete line is what the finished file gives.
    assert {n: got.get(n) for n in want} == want
    assert sum(b.lines_read for b in batches) == complete

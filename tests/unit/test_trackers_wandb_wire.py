"""W&B records read in place give what wandb's own `Record` class decodes, and only history."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.trackers.common import RunRead
from collectors.trackers.framing import CHECKED, FramingError, WandbLogReader, record_intact
from collectors.trackers.wandb_run import WandbRun

pytest.importorskip("wandb")
from wandb.proto.wandb_internal_pb2 import Record  # noqa: E402

STORES = Path(__file__).resolve().parents[1] / "data" / "trackers"
JSON_VALUES = [
    "0",
    "2",
    "-1.5e-07",
    "1.7958376384724007e+09",
    "NaN",
    "Infinity",
    "-Infinity",
    '"text"',
    "true",
    "null",
    '{"_type": "image"}',
    "1" * 140,
    "",
    "nan",
]


def _both_ways(raw: bytes) -> tuple[Any, Any]:
    """(in place, by wandb's class): the metrics, label and status each gives."""
    results = []
    for in_place in (True, False):
        run, out = WandbRun("offline-run-x"), RunRead()
        if in_place:
            run._read_records([raw], [CHECKED], out)  # as `read` reads it (no chunk: no sum)
        else:
            run._decode_record(raw, out)
        results.append(
            ([(m.values, m.step, m.taken_at) for m in out.metrics], run._label, run._status)
        )
    return results[0], results[1]


def _same(got: Any, want: Any) -> bool:
    """Equal, NaN equal to NaN."""
    return repr(got) == repr(want) and str(got) == str(want)


def _history(
    items: list[tuple[list[str] | str, str]], step: int | None = None, num: int = 7
) -> bytes:
    record = Record(num=num)
    for key, value in items:
        item = record.history.item.add(value_json=value)
        if isinstance(key, str):
            item.key = key
        else:
            item.nested_key.extend(key)
    if step is not None:
        record.history.step.num = step
    elif not items:
        record.history.SetInParent()
    return record.SerializeToString()


def test_every_record_of_the_real_runs_reads_the_same_both_ways() -> None:
    kinds = set()
    for log in (STORES / "wandb").glob("*/run-*.wandb"):
        records, _used = WandbLogReader().feed(log.read_bytes())
        for raw in records:
            kinds.add(Record.FromString(raw).WhichOneof("record_type"))
            in_place, decoded = _both_ways(raw)
            assert _same(in_place, decoded)
    assert {"history", "summary", "run", "exit", "output_raw"} <= kinds


@pytest.mark.parametrize(
    "items, step",
    [
        ([(["train", "loss"], "0.5"), (["_step"], "3")], None),  # nested keys joined by /
        ([("loss", "0.5"), ("_step", '"x"'), ("_step", "4"), ("_step", "5")], None),
        ([(["loss"], "NaN"), (["acc"], "-Infinity"), (["_timestamp"], "1.5e9")], 300),
        ([(["loss"], "0.5")], -2),  # a negative step: ten bytes of varint
        ([([], "0.5"), (["é/ü"], "1"), (["x" * 200], "2"), (["v"], "3" * 130)], 2**40),
        ([(["_runtime"], "1.0"), (["_step"], "1")], None),  # no metric: no row
        ([], None),
    ],
)
def test_history_layouts_read_the_same_both_ways(items: list, step: int | None) -> None:
    in_place, decoded = _both_ways(_history(items, step))
    assert _same(in_place, decoded)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.text(max_size=12),
                st.lists(st.text(max_size=6), max_size=3),
                st.sampled_from(["_step", "_timestamp", "_runtime", "loss", "val/acc"]),
            ),
            st.one_of(st.sampled_from(JSON_VALUES), st.floats().map(repr), st.integers().map(str)),
        ),
        max_size=6,
    ),
    st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    st.integers(-(2**63), 2**63 - 1),
)
def test_arbitrary_history_rows_read_the_same_both_ways(
    items: list, step: int | None, num: int
) -> None:
    in_place, decoded = _both_ways(_history(items, step, num))
    assert _same(in_place, decoded)


@pytest.mark.parametrize("num", [0, 1, 127, 128, 16383, 16384, 2**40, 2**62])
@pytest.mark.parametrize("value_length", [1, 110, 30_000])  # a length of 1, 2, 3 bytes
def test_numbered_records_of_any_length_are_read_without_decoding(
    num: int, value_length: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # wandb numbers every record of a run (a number 0 is not written): past the 127th its
    # number takes two bytes, past the 16383rd three; a row of many metrics is longer than
    # 127 bytes. Such rows (a number of up to nine bytes, a length of one or two) are read in
    # place as the first ones are, without `record_kind`'s slower walk.
    from collectors.trackers import wandb_wire

    walked: list[bytes] = []
    walk = wandb_wire.record_kind
    monkeypatch.setattr(
        wandb_wire, "record_kind", lambda raw, tags: walked.append(raw) or walk(raw, tags)
    )
    value = "0." + "5" * (value_length - 2) if value_length > 2 else "5"
    raw = _history([(["loss"], value), (["_step"], "3")], num=num)
    in_place, decoded = _both_ways(raw)
    assert _same(in_place, decoded) and in_place[0][0][0] == (("train/loss", float(value)),)
    history_length = len(raw) - len(Record(num=num).SerializeToString()) - 1
    assert history_length > {1: 0, 110: 127, 30_000: 16383}[value_length]
    assert (walked == []) == (value_length < 30_000)


def test_a_key_that_is_not_utf8_refuses_the_row_both_ways() -> None:
    raw = _history([(["loss"], "0.5"), (["_runtime"], "1.0")])
    damaged = raw.replace(b"_runtime", b"_\xff\xfentime")
    assert len(damaged) == len(raw)
    in_place, decoded = _both_ways(damaged)
    assert _same(in_place, decoded) and in_place[0] == []
    assert _both_ways(raw)[0][0] != []  # the same row, undamaged, is read


def test_records_that_are_not_read_are_never_decoded() -> None:
    class Counting:
        """wandb's `Record`, counting the records decoded with it."""

        DESCRIPTOR = Record.DESCRIPTOR
        decoded: list[str] = []

        @classmethod
        def FromString(cls, raw: bytes) -> Any:  # noqa: N802 - protobuf's name
            record = Record.FromString(raw)
            cls.decoded.append(record.WhichOneof("record_type"))
            return record

    run_dir = next((STORES / "wandb").glob("offline-run-*"))
    run = WandbRun(str(run_dir))
    run.record_class = Counting
    read = run.read(budget_bytes=1 << 20)
    assert len(read.metrics) == 20 and read.label in ("demo/good-run", "demo/nan-run")
    assert read.status is not None
    assert sorted(Counting.decoded) == ["exit", "run"]  # no summary, console or history


def test_a_history_value_of_nan_stays_nan() -> None:
    in_place, _decoded = _both_ways(_history([(["loss"], "NaN"), (["_step"], "2")]))
    ((values, step, _stamp),) = in_place[0]
    assert step == 2 and math.isnan(values[0][1])


def test_an_item_with_a_field_after_its_value_is_read_by_wandbs_class() -> None:
    from wandb.proto.wandb_internal_pb2 import HistoryItem

    item = HistoryItem(nested_key=["loss"], value_json="0.5").SerializeToString()
    item += b"\x88\x01\x05"  # field 17, a varint: unknown to this wandb, kept by protobuf
    history = b"\x0a" + bytes([len(item)]) + item
    raw = Record(num=7).SerializeToString() + b"\x12" + bytes([len(history)]) + history
    in_place, decoded = _both_ways(raw)
    assert in_place == decoded and in_place[0][0][0] == (("train/loss", 0.5),)


def test_a_length_of_three_bytes_cut_short_goes_to_wandbs_class() -> None:
    # A kind's length whose second byte says a third follows, and no third: protobuf refuses
    # the record; the inlined first test must not read the two bytes as a length and pass the
    # record over (a summary) or read it (a history).
    from collectors.trackers.wandb_wire import HistoryReader, RecordNumbers, RecordTags

    tags = RecordTags.of(RecordNumbers.of(Record))
    for name in ("summary", "history"):
        [kind] = [tag for tag, of in tags.kinds.items() if of == name]
        raw = bytes([0x08, 0x05, kind, 0x85, 0x85]) + b"x" * 0x84  # ends where 85 85 would
        with pytest.raises(Exception, match="[Tt]runcated|[Ee]rror|[Dd]ecode"):
            Record.FromString(raw)
        assert HistoryReader(tags).read([raw], 0, [], [CHECKED]) == 0  # the class decides


def _kind(raw: bytes) -> str | None:
    return Record.FromString(raw).WhichOneof("record_type")


GOOD_RUN = max((STORES / "wandb").glob("*/run-*.wandb"), key=lambda p: p.stat().st_size)
"""The good run: its run record spans two 32 KiB blocks (a record of several chunks)."""


def test_the_log_reader_leaves_one_chunk_records_to_be_checked_where_they_are_read() -> None:
    data = GOOD_RUN.read_bytes()
    unchecked: list[int] = []
    records, used = WandbLogReader().feed(data, unchecked)
    assert (records, used) == WandbLogReader().feed(data) and len(unchecked) == len(records)
    # the record of several chunks was checked as it was joined; the others are left
    assert [len(raw) > 32 * 1024 for raw in records] == [crc == CHECKED for crc in unchecked]
    assert all(record_intact(raw, crc) for raw, crc in zip(records, unchecked, strict=True))
    row = next(raw for raw in records if _kind(raw) == "history")
    damaged = bytearray(data)
    damaged[data.index(row) + len(row) // 2] ^= 0x01
    unchecked = []
    records, _used = WandbLogReader().feed(bytes(damaged), unchecked)  # not refused here
    assert [record_intact(raw, crc) for raw, crc in zip(records, unchecked, strict=True)].count(
        False
    ) == 1
    checking = WandbLogReader()  # where every chunk is checked: the records before it, then
    before, used = checking.feed(bytes(damaged))  # the damage, raised at the next feed
    assert before == records[: len(before)] and len(before) < len(records)
    with pytest.raises(FramingError):
        checking.feed(bytes(damaged)[used:])


def _damaged_copy(tmp_path: Path, kind: str, which: int) -> tuple[WandbRun, int]:
    """A copy of the good run with one byte of its `which`-th record of `kind` flipped (a digit
    of its loss where it has one), and how many history rows come before that record."""
    run_dir = tmp_path / GOOD_RUN.parent.name
    shutil.copytree(GOOD_RUN.parent, run_dir)
    data = bytearray(GOOD_RUN.read_bytes())
    records, _used = WandbLogReader().feed(bytes(data))
    target = [raw for raw in records if _kind(raw) == kind][which]
    rows_before = [_kind(raw) for raw in records[: records.index(target)]].count("history")
    at = bytes(data).index(target)
    if b"train/loss" in target:  # a digit of the loss: the record still reads, wrongly
        key = target.index(b"train/loss")
        at += target.index(b"\x82\x01", key) + 3
        assert chr(data[at]).isdigit()
    else:
        at += len(target) - 3  # in its last field's bytes
    data[at] ^= 0x01
    (run_dir / GOOD_RUN.name).write_bytes(bytes(data))
    return WandbRun(str(run_dir)), rows_before


def test_a_damaged_row_is_said_and_the_rows_before_it_are_kept(tmp_path: Path) -> None:
    run, rows_before = _damaged_copy(tmp_path, "history", 5)
    read = run.read(budget_bytes=1 << 20)
    assert len(read.metrics) == rows_before == 5
    assert run.damaged is not None and "checksum" in run.damaged
    assert run.read().metrics == []  # given up on, said once by the collector


def test_a_damaged_exit_record_is_said_as_a_damaged_row_is(tmp_path: Path) -> None:
    run, rows_before = _damaged_copy(tmp_path, "exit", 0)
    read = run.read(budget_bytes=1 << 20)
    assert len(read.metrics) == rows_before == 20 and read.status is None
    assert run.damaged is not None and "checksum" in run.damaged


def test_a_damaged_summary_is_passed_over_like_any_summary(tmp_path: Path) -> None:
    # Nothing of it is read, so its checksum is not checked: every row still reads.
    run, _rows_before = _damaged_copy(tmp_path, "summary", 3)
    read = run.read(budget_bytes=1 << 20)
    assert len(read.metrics) == 20 and read.status == "FINISHED" and run.damaged is None

"""Tracker stores read while they are written: partial records, new files, WAL rows, tasks."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.base import CollectorError
from collectors.logs.discovery import LogDiscovery
from collectors.trackers.collector import TrackerRunCollector
from collectors.trackers.framing import FramingError, WandbLogReader, split_tfrecords
from collectors.trackers.tensorboard import load_protos
from collectors.trackers.tensorboard_events import float32_value
from gpuherd.tasks.tracker import TaskTracker

STORES = Path(__file__).resolve().parents[1] / "data" / "trackers"


def _collector(task_id: Path | str) -> TrackerRunCollector:
    collector = TrackerRunCollector(str(task_id), poll_interval_s=0.0)
    collector.open()
    return collector


def _points(collector: TrackerRunCollector) -> list[tuple[int | None, str, float]]:
    batch = collector.sample()
    return [(m.step, name, value) for _n, m in batch.metrics for name, value in m.values]


def test_tensorboard_file_followed_through_a_partial_record_and_a_new_file(tmp_path: Path) -> None:
    source = next((STORES / "tensorboardx/lightning_logs/version_0").glob("events.*"))
    data = source.read_bytes()
    run = tmp_path / "version_0"
    run.mkdir()
    events = run / source.name
    _event, crc, _native = load_protos()
    records, _used = split_tfrecords(data, crc)
    cut = len(data) - (len(records[-1]) + 16) // 2  # half of the last record written
    events.write_bytes(data[:cut])
    collector = _collector(run)
    first = _points(collector)
    assert first[-1] == (19, "train/loss", 0.1)  # the accuracy at 19 is still being written
    assert _points(collector) == []
    assert not collector.backlog  # a record being written is waited for, not spun on
    with events.open("ab") as handle:
        handle.write(data[cut:])
    assert _points(collector) == [(19, "val/acc", 0.88)]
    (run / (source.name + ".resumed")).write_bytes(data)  # a resumed run writes a new file
    again = _points(collector)
    assert len(again) == 24 and again[0] == (0, "train/loss", 2.0)


def test_tensorboard_written_live_by_tensorboardx(tmp_path: Path) -> None:
    # SummaryWriter's own thread writes when it pleases; its file writer writes at once
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.summary import scalar

    (tmp_path / "run").mkdir()
    writer = EventsWriter(str(tmp_path / "run" / "events"))

    def add(tag: str, value: float, step: int) -> None:
        writer.write_event(Event(wall_time=1.0, step=step, summary=scalar(tag, value)))
        writer.flush()

    add("train/loss", 0.5, 1)
    collector = _collector(tmp_path / "run")
    assert _points(collector) == [(1, "train/loss", 0.5)]
    add("train/loss", float("nan"), 2)
    batch = collector.sample()
    assert [f.kind for _n, f in batch.findings] == ["nan"] and batch.findings[0][0] == 2
    add("Loss/val", 0.25, 2)
    assert _points(collector) == [(2, "val/loss", 0.25)]
    writer.close()


def test_a_damaged_record_is_said_once_and_the_points_before_are_kept(tmp_path: Path) -> None:
    source = next((STORES / "tensorboardx/lightning_logs/version_0").glob("events.*"))
    data = bytearray(source.read_bytes())
    _event, crc, _native = load_protos()
    records, _used = split_tfrecords(bytes(data), crc)
    start = sum(len(r) + 16 for r in records[:10])
    data[start] ^= 0xFF  # the length of record 11: its checksum no longer matches
    run = tmp_path / "run"
    run.mkdir()
    (run / source.name).write_bytes(bytes(data))
    collector = _collector(run)
    assert len(collector.sample().metrics) == 9  # record 1 is the file version, no scalar
    with pytest.raises(CollectorError, match="checksum"):
        collector.sample()
    assert collector.sample().metrics == ()


def test_split_tfrecords_rejects_a_bad_length_checksum() -> None:
    _event, crc, _native = load_protos()
    with pytest.raises(FramingError):
        split_tfrecords(b"\x05" + b"\x00" * 15, crc)
    assert split_tfrecords(b"\x05" + b"\x00" * 10, crc) == ([], 0)  # a header still written


def _wal_copy(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    db = tmp_path / "mlflow.db"
    shutil.copy(STORES / "mlflow_sqlite" / "mlflow.db", db)
    writer = sqlite3.connect(db)
    assert writer.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    return db, writer


def test_mlflow_sqlite_rows_written_in_wal_mode_while_read(tmp_path: Path) -> None:
    db, writer = _wal_copy(tmp_path)
    uuid = writer.execute("SELECT run_uuid FROM runs WHERE name = 'good-run'").fetchone()[0]
    writer.execute("UPDATE runs SET status = 'RUNNING' WHERE run_uuid = ?", (uuid,))
    writer.commit()
    collector = _collector(f"{db}#{uuid}")
    first = collector.sample()
    assert len(first.metrics) == 24 and first.ended_with is None  # RUNNING: no end
    writer.execute("BEGIN")
    writer.execute(
        "INSERT INTO metrics VALUES ('train/loss', 0.0, 1700000020000, ?, 20, 1)", (uuid,)
    )
    assert collector.sample().metrics == ()  # not committed: not seen, and not blocked
    writer.commit()
    batch = collector.sample()
    ((number, metric),) = batch.metrics
    assert number == 25 and metric.step == 20 and math.isnan(metric.values[0][1])
    assert [f.evidence for _n, f in batch.findings] == ["train/loss = nan at step 20"]
    writer.execute("UPDATE runs SET status = 'KILLED' WHERE run_uuid = ?", (uuid,))
    writer.commit()
    assert collector.sample().ended_with == 143  # read as stopped, like SIGTERM
    collector.close()
    writer.close()


def test_mlflow_sqlite_value_zero_is_zero_unless_flagged_nan(tmp_path: Path) -> None:
    db, writer = _wal_copy(tmp_path)
    uuid = writer.execute("SELECT run_uuid FROM runs WHERE name = 'good-run'").fetchone()[0]
    collector = _collector(f"{db}#{uuid}")
    collector.sample()
    writer.execute(
        "INSERT INTO metrics VALUES ('train/loss', 0.0, 1700000021000, ?, 21, 0)", (uuid,)
    )
    writer.execute(
        "INSERT INTO metrics VALUES ('train/loss', 1.7976931348623157e308, "
        "1700000022000, ?, 22, 0)",
        (uuid,),
    )
    writer.commit()
    values = [m.values[0][1] for _n, m in collector.sample().metrics]
    assert values == [0.0, math.inf]


def test_mlflow_file_store_appended_with_a_partial_line_and_a_new_key(tmp_path: Path) -> None:
    store = tmp_path / "mlruns"
    shutil.copytree(STORES / "mlflow_file" / "mlruns", store)
    run = next(p.parent for p in store.glob("*/*/meta.yaml"))
    collector = _collector(run)
    assert len(collector.sample().metrics) == 24
    loss = run / "metrics" / "train" / "loss"
    with loss.open("a") as handle:
        handle.write("1700000020000 0.09 20\n1700000021000 0.0")
    assert _points(collector) == [(20, "train/loss", 0.09)]
    with loss.open("a") as handle:
        handle.write("8 21\n")
    (run / "metrics" / "lr").write_text("1700000021500 0.001 21\n")
    assert _points(collector) == [(21, "train/loss", 0.08), (21, "lr", 0.001)]


def test_tasks_named_by_the_tracker_with_its_status_and_nan_finding() -> None:
    tracker = TaskTracker()
    for run in sorted((STORES / "mlflow_file" / "mlruns").glob("*/*/meta.yaml")):
        collector = _collector(run.parent)
        tracker.add_batch(collector.sample())
    views = {view.label: view for view in tracker.views()}
    assert sorted(views) == ["demo/good-run", "demo/nan-run"]
    assert views["demo/good-run"].status == "done"
    assert views["demo/nan-run"].status == "failed"
    assert dict(views["demo/good-run"].latest)["val/acc"] == 0.88
    assert any(f.kind == "nan" for f in views["demo/nan-run"].findings)


def test_watch_finds_one_task_per_run_and_no_console_task(tmp_path: Path) -> None:
    shutil.copytree(STORES, tmp_path / "stores")
    found = LogDiscovery(watch=[str(tmp_path / "stores")]).scan()
    kinds = sorted(log.kind for log in found)
    assert (
        kinds == ["mlflow_file"] * 2 + ["mlflow_sqlite"] * 2 + ["tensorboard"] * 4 + ["wandb"] * 2
    )
    assert not [log for log in found if log.task_id.endswith(".log")]


def test_a_wandb_log_cut_anywhere_gives_the_same_records() -> None:
    logs = sorted((STORES / "wandb").glob("*/run-*.wandb"), key=lambda p: p.stat().st_size)
    data = logs[-1].read_bytes()  # the good run: its config record spans two 32 KiB blocks
    whole, used = WandbLogReader().feed(data)
    assert used == len(data) and len(whole) > 40
    assert max(map(len, whole)) > 32 * 1024

    @settings(max_examples=50, deadline=None)
    @given(st.lists(st.integers(0, len(data)), max_size=6))
    def cut_at(cuts: list[int]) -> None:
        reader, records, offset = WandbLogReader(), [], 0
        for end in [*sorted(cuts), len(data)]:
            got, _used = reader.feed(data[reader.offset : end])
            records += got
            offset = reader.offset
        assert records == whole and offset == len(data)

    cut_at()


def test_a_wandb_chunk_with_a_bad_checksum_is_refused() -> None:
    data = bytearray(next((STORES / "wandb").glob("*/run-*.wandb")).read_bytes())
    data[20] ^= 0x01
    with pytest.raises(FramingError):
        WandbLogReader().feed(bytes(data))
    with pytest.raises(FramingError, match="no :W&B header"):
        WandbLogReader().feed(b"garbage")


@pytest.mark.parametrize(
    ("stored", "shown"),
    [(0.88, 0.88), (0.1667, 0.1667), (2.0, 2.0), (1e-7, 1e-7), (math.inf, math.inf)],
)
def test_float32_values_read_as_the_number_logged(stored: float, shown: float) -> None:
    import struct

    as_float32 = struct.unpack("<f", struct.pack("<f", stored))[0]
    assert as_float32 != stored or stored in (2.0, math.inf)
    assert float32_value(as_float32) == shown


def test_tensor_scalars_of_other_types_keep_their_precision(tmp_path: Path) -> None:
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto

    scalars = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    (tmp_path / "run").mkdir()
    writer = EventsWriter(str(tmp_path / "run" / "events"))
    tensors = [
        ("lr", TensorProto(dtype=2, double_val=[0.1234567890123]), scalars),
        ("tokens", TensorProto(dtype=9, int64_val=[2**40]), scalars),
        ("zero", TensorProto(dtype=1, float_val=[0.0]), scalars),
        ("lr", TensorProto(dtype=2, double_val=[0.5]), None),
    ]  # plugin named once
    for step, (tag, tensor, metadata) in enumerate(tensors):
        value = Summary.Value(tag=tag, tensor=tensor, metadata=metadata)
        writer.write_event(Event(step=step, summary=Summary(value=[value])))
    (tag, tensor, _m) = ("hist", TensorProto(dtype=1, float_val=[1.0]), None)
    histo = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="histograms"))
    writer.write_event(
        Event(
            step=9, summary=Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=histo)])
        )
    )
    writer.close()
    assert _points(_collector(tmp_path / "run")) == [
        (0, "lr", 0.1234567890123),
        (1, "tokens", float(2**40)),
        (2, "zero", 0.0),
        (3, "lr", 0.5),
    ]


def test_a_run_followed_live_has_a_speed_from_its_points_times(tmp_path: Path) -> None:
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.summary import scalar

    (tmp_path / "version_0").mkdir()
    writer = EventsWriter(str(tmp_path / "version_0" / "events"))
    collector, tracker = None, TaskTracker()
    for step in range(12):  # two steps a second, by the writer's own clock
        writer.write_event(
            Event(
                wall_time=1000.0 + step / 2,
                step=step,
                summary=scalar("train/loss", 1.0 / (1 + step)),
            )
        )
        writer.flush()
        if collector is None:
            collector = _collector(tmp_path / "version_0")
        tracker.add_batch(collector.sample())
    writer.close()
    (view,) = tracker.views()
    assert view.label == f"{tmp_path.name}/version_0"
    assert view.throughput_name == "steps_s" and view.throughput == pytest.approx(2.0)
    assert view.step == 11 and dict(view.latest)["train/loss"] == pytest.approx(1 / 12)

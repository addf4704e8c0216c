"""TensorBoard scalar events read in place give what tensorboardX's `Event` class decodes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.trackers.framing import split_tfrecords
from collectors.trackers.tensorboard import load_protos
from collectors.trackers.tensorboard_events import EventReader, EventTags

pytest.importorskip("tensorboardX")
from tensorboardX.proto.event_pb2 import Event  # noqa: E402
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata  # noqa: E402
from tensorboardX.proto.tensor_pb2 import TensorProto  # noqa: E402

STORES = Path(__file__).resolve().parents[1] / "data" / "trackers"
TAGS = EventTags.of(Event)


def _both_ways(records: list[bytes]) -> tuple[Any, Any]:
    """(in place, by the class): the points and the plugins each read gives."""
    results = []
    for tags in (TAGS, None):
        plugins: dict[str, str] = {}
        metrics: list[Any] = []
        EventReader(Event, "run", tags).read(records, plugins, metrics)
        results.append((repr([(m.values, m.step, m.taken_at) for m in metrics]), plugins))
    return results[0], results[1]


def test_the_descriptor_gives_the_tags_of_the_scalar_layout() -> None:
    assert TAGS is not None and (TAGS.wall_time, TAGS.step, TAGS.summary) == (0x09, 0x10, 0x2A)
    assert (TAGS.value, TAGS.tag, TAGS.simple_value) == (0x0A, 0x0A, 0x15)


def test_every_event_of_the_stored_runs_reads_the_same_both_ways() -> None:
    _event, crc, _native = load_protos()
    read = 0
    for events in STORES.glob("tensorboard*/**/events.out.tfevents.*"):
        records, _used = split_tfrecords(events.read_bytes(), crc)
        in_place, decoded = _both_ways(records)
        assert in_place == decoded
        read += len(records)
    assert read > 40


def test_an_event_of_another_layout_is_read_by_the_class() -> None:
    scalars = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    events = [
        Event(wall_time=1.5, step=3, file_version="brain.Event:2"),
        Event(step=4, summary=Summary(value=[Summary.Value(tag="a", simple_value=0.5)])),
        Event(
            step=5,
            summary=Summary(
                value=[
                    Summary.Value(
                        tag="lr", metadata=scalars, tensor=TensorProto(dtype=2, double_val=[0.25])
                    )
                ]
            ),
        ),
        Event(summary=Summary(value=[Summary.Value(tag="x" * 200, simple_value=2.0)])),
        Event(step=-3, summary=Summary(value=[Summary.Value(tag="b", simple_value=-0.0)])),
    ]
    records = [event.SerializeToString() for event in events]
    records.append(records[1] + Event(step=9).SerializeToString())  # a field after the summary
    records.append(records[1][:-2])  # cut short: damaged, no point either way
    in_place, decoded = _both_ways(records)
    assert in_place == decoded
    assert decoded[1] == {"a": "", "lr": "scalars", "x" * 200: "", "b": ""}


def test_damaged_varints_read_as_the_class_reads_them_and_scalars_go_the_fast_way() -> None:
    good = Event(step=4, summary=Summary(value=[Summary.Value(tag="a", simple_value=0.5)]))
    raw = good.SerializeToString()
    step_at = raw.index(bytes([TAGS.step, 4]))
    records = [
        raw,
        # an 11-byte step: longer than any varint; a 10-byte one beyond 64 bits
        raw[:step_at] + bytes([TAGS.step]) + b"\xff" * 10 + b"\x01" + raw[step_at + 2 :],
        raw[:step_at] + bytes([TAGS.step]) + b"\xff" * 9 + b"\x7f" + raw[step_at + 2 :],
        raw[:step_at] + bytes([TAGS.step]) + b"\xff" * 9 + b"\x01" + raw[step_at + 2 :],
    ]
    in_place, decoded = _both_ways(records)
    assert in_place == decoded
    assert "(('a', 0.5),), 4," in decoded[0] and ", -1," in decoded[0]  # 2**64 - 1 is -1

    class Counting:
        """The class, counting the events it decodes."""

        decoded = 0

        @classmethod
        def FromString(cls, data: bytes) -> Any:  # noqa: N802 - protobuf's name
            cls.decoded += 1
            return Event.FromString(data)

    EventReader(Counting, "run", TAGS).read([raw] * 5, {}, [])
    assert Counting.decoded == 0  # the writers' layout never goes through the class


def test_a_tag_read_before_is_known_by_its_bytes_and_reads_the_same() -> None:
    def event(step: int, *values: tuple[str, float], wall_time: float = 2.5) -> bytes:
        summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values])
        return Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()

    records = [
        event(1, ("a", 0.5)),
        event(2, ("a", 0.25)),  # the same bytes up to the number: read by one lookup
        event(2**40, ("a", math.nan), wall_time=0.0),
        event(3, ("a", 1.0), ("b", 2.0)),  # two values: not the remembered summary
        event(-1, ("a", 0.0)),
        event(4, ("ab", 3.0)),
    ]
    records.append(records[1] + b"\x00")  # the same bytes and one more: damaged, no point
    in_place, decoded = _both_ways(records)
    assert in_place == decoded and in_place[0].count("'a'") == 5


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(allow_nan=True, width=64),
            st.integers(-(2**63), 2**63 - 1),
            st.lists(
                st.tuples(
                    st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
                    st.one_of(st.floats(width=32), st.just(0.0), st.just(math.inf)),
                ),
                max_size=3,
            ),
        ),
        max_size=4,
    )
)
def test_arbitrary_scalar_events_read_the_same_both_ways(
    events: list[tuple[float, int, list[tuple[str, float]]]],
) -> None:
    records = [
        Event(
            wall_time=wall_time,
            step=step,
            summary=Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values]),
        ).SerializeToString()
        for wall_time, step, values in events
    ]
    in_place, decoded = _both_ways(records)
    assert in_place == decoded

"""TensorBoard events to metrics: the per-event work of reading a run, and its numbers.

An event of the layout tensorboardX, `torch.utils.tensorboard` and Lightning write for a
scalar (wall time, step, and a summary of values that are a tag and a `simple_value`,
nothing else) is read in place from its protobuf bytes, with the field numbers taken from
tensorboardX's own `Event` descriptor at start, never written here. Any other event (the
file's version, a tensor scalar, a value with metadata, fields in another order) is decoded
with that `Event` class, as before; both give the same points. This module is compiled with
mypyc in a built wheel (`hatch_build.py`), as `parsers/` is: every TensorBoard point passes
through it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Final

from collectors.trackers.common import tag_split_name
from collectors.trackers.wire import (
    I32,
    I64,
    INT64_WRAP,
    LEN,
    VARINT,
    WireError,
    read_varint,
    tag,
)
from parsers.model import LogMetric
from parsers.path_formats import tensorboard_metric_name

_SCALAR_PLUGINS: Final = ("scalars", "")
_DT_FLOAT: Final = 1
_DT_DOUBLE: Final = 2
_DT_INT32: Final = 3
_DT_INT64: Final = 9
_DT_HALF: Final = 19
_CONTENT_FORMATS: Final = {
    _DT_FLOAT: "<f",
    _DT_DOUBLE: "<d",
    _DT_INT32: "<i",
    _DT_INT64: "<q",
    _DT_HALF: "<e",
}


@dataclass(frozen=True)
class EventTags:
    """The one-byte tags of the fields a scalar event is read in place by."""

    wall_time: int
    step: int
    summary: int
    value: int
    tag: int
    simple_value: int

    @classmethod
    def of(cls, event_class: Any) -> EventTags | None:
        """The tags in `event_class`'s descriptor (tensorboardX's `Event`).

        `None` if one of them is longer than a byte: then every event is decoded by the class.
        """
        event = event_class.DESCRIPTOR
        summary = event.fields_by_name["summary"].message_type
        value = summary.fields_by_name["value"].message_type
        tags = cls(
            wall_time=tag(event.fields_by_name["wall_time"].number, I64),
            step=tag(event.fields_by_name["step"].number, VARINT),
            summary=tag(event.fields_by_name["summary"].number, LEN),
            value=tag(summary.fields_by_name["value"].number, LEN),
            tag=tag(value.fields_by_name["tag"].number, LEN),
            simple_value=tag(value.fields_by_name["simple_value"].number, I32),
        )
        one_byte = (tags.wall_time, tags.step, tags.summary, tags.value, tags.tag)
        return tags if max(*one_byte, tags.simple_value) < 0x80 else None


Points = tuple[int, float, list[tuple[str, float]]]
"""An event's step, wall time and (tag, number) of each scalar value."""


_unpack_double: Final = struct.Struct("<d").unpack_from
_unpack_float: Final = struct.Struct("<f").unpack_from
_MAX_PREFIXES: Final = 4096


class EventReader:
    """Reads the scalar points of a run's events; remembers its tags' names and layouts."""

    def __init__(self, event_class: Any, run_name: str, tags: EventTags | None) -> None:
        """A reader of one run's events.

        Args:
            event_class: tensorboardX's `Event` message class.
            run_name: the run directory's name (a bare Keras tag takes its split from it).
            tags: `EventTags.of(event_class)`; `None` decodes every event with the class.
        """
        self.event_class = event_class
        self.run_name = run_name
        self.tags = tags
        self.names: dict[str, str] = {}
        """The metric name of each tag seen in the run."""
        self._prefixes: dict[bytes, str] = {}
        """The summary of a one-value event up to its number -> the value's tag. A run logs a
        few tags: once such a summary is read, the next with the same bytes is known by one
        lookup."""

    def read(self, records: list[bytes], plugins: dict[str, str], metrics: list[LogMetric]) -> None:
        """The scalar points of `records`, one `LogMetric` each, added to `metrics` in order.

        Args:
            records: whole records of one event file.
            plugins: the plugin of each tag seen in the file, filled as tags come (the plugin
                is named in a tag's first value only).
            metrics: where the points go.
        """
        names, tags = self.names, self.tags
        for record in records:
            if tags is not None and self._scalar_event(record, tags, plugins, metrics):
                continue
            step, wall_time, values = _decoded_event(record, self.event_class, plugins)
            for tag_name, number in values:
                name = names[tag_name] if tag_name in names else self._new_name(tag_name)
                # positional: the keyword call costs more, once per point
                metrics.append(LogMetric(((name, number),), step, None, wall_time))

    def _new_name(self, tag_name: str) -> str:
        # named as TensorBoard's CSV export of the tag would be (`parsers.path_formats`): a
        # bare Keras tag takes its split from the run (`validation`/`epoch_loss`)
        export = f"run-{self.run_name}-tag-{tag_split_name(tag_name)}.csv"
        name = self.names[tag_name] = tensorboard_metric_name(export)
        return name

    def _scalar_event(
        self, raw: bytes, tags: EventTags, plugins: dict[str, str], metrics: list[LogMetric]
    ) -> bool:
        """Read an event of the scalar layout in place, its points added to `metrics`.

        The event's fields come in their numbers' order, as protobuf writes them: wall time
        and step (each left out when 0), then the summary filling the record; each value is
        its tag then its simple value. A value with no metadata names no plugin: `""`, as
        decoded.

        Returns:
            Whether the event is of this layout; if not, nothing was added.
        """
        size = len(raw)
        try:
            pos, wall_time, step = 0, 0.0, 0
            if raw[0] == tags.wall_time:
                wall_time = float(_unpack_double(raw, 1)[0])
                pos = 9
            if raw[pos] == tags.step:
                step, pos = read_varint(raw, pos + 1)
                if step >= 1 << 63:
                    step -= INT64_WRAP
            # a one-value summary read before: the same bytes up to the number, filling it
            summary_at, name_end = pos, pos + 6 + raw[pos + 5]
            known = self._prefixes.get(raw[pos : name_end + 1])
            found: list[tuple[str, float]] | None
            if known is not None and name_end + 5 == size:
                found = [(known, float(_unpack_float(raw, name_end + 1)[0]))]
            else:
                found = _summary_values(raw, pos, tags)
                if found is None:
                    return False
                if (
                    len(found) == 1
                    and raw[summary_at + 1] < 0x80
                    and len(self._prefixes) < _MAX_PREFIXES
                ):
                    self._prefixes[raw[summary_at : size - 4]] = found[0][0]
        except (IndexError, struct.error, UnicodeDecodeError, WireError):
            return False  # cut short, a bad varint or string protobuf refuses: the class decides
        names = self.names
        for tag_name, number in found:
            if tag_name not in plugins:
                plugins[tag_name] = ""
            name = names[tag_name] if tag_name in names else self._new_name(tag_name)
            # a simple value other than 0 is given as the float32 it is; 0 is 0
            value = float32_value(number) if number else number
            metrics.append(LogMetric(((name, value),), step, None, wall_time))
        return True


def _summary_values(raw: bytes, pos: int, tags: EventTags) -> list[tuple[str, float]] | None:
    """The (tag, simple value) of each value of the summary at `pos`; `None` for another layout.

    The summary must fill the record, and each value be its tag then its simple value.

    Raises:
        IndexError, struct.error: cut short.
        UnicodeDecodeError: a tag that is not UTF-8 (protobuf refuses it too).
    """
    size = len(raw)
    if raw[pos] != tags.summary:
        return None
    length, pos = read_varint(raw, pos + 1)
    if pos + length != size:
        return None
    found: list[tuple[str, float]] = []
    while pos < size:
        if raw[pos] != tags.value or raw[pos + 2] != tags.tag:
            return None
        name_length = raw[pos + 3]
        end = pos + 2 + raw[pos + 1]  # a value of one-byte length: a short tag
        name_end = pos + 4 + name_length
        if raw[pos + 1] >= 0x80 or name_length >= 0x80 or name_end + 5 != end:
            return None
        if raw[name_end] != tags.simple_value:
            return None
        number = float(_unpack_float(raw, name_end + 1)[0])
        found.append((raw[pos + 4 : name_end].decode(), number))
        pos = end
    return found


def _decoded_event(record: bytes, event_class: Any, plugins: dict[str, str]) -> Points:
    """The points of an event decoded by tensorboardX's `Event` class (none if damaged)."""
    values: list[tuple[str, float]] = []
    try:
        event = event_class.FromString(record)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError: one damaged record
        return 0, 0.0, values
    for value in event.summary.value:  # empty for the file version, graphs, run metadata
        name: str = value.tag
        plugin = plugins.get(name)
        if plugin is None:  # the plugin is named in a tag's first value only
            plugin = plugins[name] = value.metadata.plugin_data.plugin_name
        number: float | None = value.simple_value
        # a simple value other than 0 is one; 0 may be the default of another kind
        if number:
            number = float32_value(number)
        else:
            kind = value.WhichOneof("value")
            if kind == "tensor" and plugin in _SCALAR_PLUGINS:
                number = tensor_scalar(value.tensor)
            elif kind != "simple_value":
                continue
        if number is not None:
            values.append((name, number))
    return int(event.step), float(event.wall_time), values


def tensor_scalar(tensor: Any) -> float | None:
    """The value of a 0-d numeric `TensorProto`, `None` for any other tensor."""
    if len(tensor.tensor_shape.dim):
        return None
    dtype = tensor.dtype
    fmt = _CONTENT_FORMATS.get(dtype)
    if fmt is None:
        return None
    if tensor.tensor_content:
        number = float(struct.unpack_from(fmt, tensor.tensor_content)[0])
        return float32_value(number) if dtype in (_DT_FLOAT, _DT_HALF) else number
    values = (
        tensor.float_val
        if dtype == _DT_FLOAT
        else tensor.double_val
        if dtype == _DT_DOUBLE
        else tensor.int64_val
        if dtype == _DT_INT64
        else tensor.int_val
    )
    if dtype == _DT_HALF and tensor.half_val:
        return float(struct.unpack("<e", struct.pack("<H", tensor.half_val[0]))[0])
    if not len(values):
        return None
    return float32_value(values[0]) if dtype == _DT_FLOAT else float(values[0])


_pack_f32: Final = struct.Struct("<f").pack


def float32_value(value: float) -> float:
    """A 32-bit float as the shortest decimal that is the same float32 (0.88, not 0.8799999...).

    The writer stored the number it was given in 32 bits; the shortest decimal that rounds to
    those bits is what the training logged.
    """
    if not math.isfinite(value):
        return value
    packed = _pack_f32(value)
    for digits in ("%.6g", "%.7g", "%.8g"):
        shorter = float(digits % value)
        if _pack_f32(shorter) == packed:
            return shorter
    return value

"""Follow a TensorBoard run directory: every `events.out.tfevents.*` file in it, as written.

The records are cut by `framing.split_tfrecords` and read into points by
`tensorboard_events.EventReader`: a scalar event of the writers' layout from its bytes (field
numbers from the descriptors tensorboardX ships), any other with its protobuf classes
(`tensorboardX.proto.event_pb2`). Scalars come in two encodings: `simple_value`
(tensorboardX, `torch.utils.tensorboard`, Lightning) and a 0-d tensor under the `scalars`
plugin (`tf.summary` v2, Keras, `tensorboard.summary.Writer`). The plugin is named only in a
tag's first value, so it is remembered per file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from collectors.trackers.common import READ_BUDGET_BYTES, RunRead, missing_extra
from collectors.trackers.framing import FramingError, split_tfrecords
from collectors.trackers.tensorboard_events import EventReader, EventTags

EVENTS_PREFIX = "events.out.tfevents."


def load_protos() -> tuple[Any, Callable[[bytes], int], bool]:
    """The `Event` class of tensorboardX, its CRC-32C and whether that CRC is native (fast).

    Raises:
        CollectorUnavailable: tensorboardX (with protobuf) is not installed.
    """
    try:
        from tensorboardX.crc32c import _crc32c_native, crc32c
        from tensorboardX.proto.event_pb2 import Event
    except ImportError as error:
        raise missing_extra(
            f"a TensorBoard run needs tensorboardX ({error})",
            "tensorboardX and protobuf (gpuherd's own dependencies: pip install tensorboardX)",
        ) from error
    return Event, crc32c, _crc32c_native is not None


def is_events_file(name: str) -> bool:
    """Whether a file name is a TensorBoard event file (not a temporary or profile file)."""
    return name.startswith(EVENTS_PREFIX) and not name.endswith((".tmp", ".profile-empty"))


class _EventFile:
    """One event file: its offset and the per-tag plugins seen in it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.size = 0
        self.plugins: dict[str, str] = {}
        self.damaged: str | None = None


class TensorBoardRun:
    """The scalars of one run directory, read by offset from each event file, oldest first."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.run_name = os.path.basename(run_dir.rstrip(os.sep)) or run_dir
        self._event, self._crc, native = load_protos()
        # The pure-Python CRC-32C costs more than the rest of a record's reading: without
        # the native `crc32c` package only each length is checked (the protobuf decode
        # still rejects a damaged message).
        self._check_data = native
        self._files: dict[str, _EventFile] = {}
        self._events = EventReader(self._event, self.run_name, EventTags.of(self._event))

    def read(self, budget_bytes: int = READ_BUDGET_BYTES) -> RunRead:
        """New scalar points of every event file, at most `budget_bytes` of records."""
        out = RunRead()  # named by its path, as TensorBoard names a run by its directory
        read = 0
        for events in self._list():
            if read >= budget_bytes:
                break
            read += self._read_file(events, out, budget_bytes - read)
        files = list(self._files.values())
        out.read_bytes = sum(f.offset for f in files)
        out.size_bytes = sum(f.size for f in files)
        # a record still being written keeps the offset below the size: read on only while
        # reading gets somewhere, else wait for the writer
        out.more = read > 0 and out.read_bytes < out.size_bytes
        out.file_path = files[-1].path if files else None
        return out

    def _list(self) -> list[_EventFile]:
        try:
            names = sorted(n for n in os.listdir(self.run_dir) if is_events_file(n))
        except OSError:
            names = []
        for name in names:
            if name not in self._files:
                self._files[name] = _EventFile(os.path.join(self.run_dir, name))
        return [self._files[name] for name in sorted(self._files)]

    def _read_file(self, events: _EventFile, out: RunRead, budget: int) -> int:
        try:
            with open(events.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                events.size = stat.st_size
                out.modified_at = max(out.modified_at or 0.0, stat.st_mtime)
                if events.damaged is not None or events.offset >= events.size:
                    return 0
                handle.seek(events.offset)
                data = handle.read(budget + 64 * 1024)
        except OSError:
            return 0  # gone between the listing and the read: looked at again next time
        try:
            records, used = split_tfrecords(data, self._crc, self._check_data)
        except FramingError as error:
            events.damaged = f"{os.path.basename(events.path)}: {error}"
            return 0
        if not records and len(data) > budget:
            records, used = split_tfrecords(
                _whole(events.path, events.offset), self._crc, self._check_data
            )
        events.offset += used
        self._events.read(records, events.plugins, out.metrics)
        return used

    @property
    def damaged(self) -> list[str]:
        """Why event files were given up on (a checksum that does not match)."""
        return [f.damaged for f in self._files.values() if f.damaged]


def _whole(path: str, offset: int) -> bytes:
    """The rest of a file whose next record is larger than one read."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read()

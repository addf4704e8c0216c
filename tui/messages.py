"""Messages to the UI thread: collector events, and how a recording made from the dashboard ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from collectors.base import CollectorEvent, Sampled
from collectors.roles import LATEST_ONLY, sample_role

if TYPE_CHECKING:
    from gpuherd.record.dashboard import RecordingEnded, RecordResult


@dataclass
class CollectorEventReceived(Message):
    """A collector event (`collectors.base.CollectorEvent`) handed to the UI thread.

    The one message for every kind of event: the app dispatches on the event's type.
    """

    event: CollectorEvent
    """`Sampled`, `Failed`, `Recovered`, `Unavailable`, `Finished` or `Crashed`."""

    def can_replace(self, message: Message) -> bool:
        """Let a newer snapshot of the same source supersede this one when the UI lags.

        Only samples of a role in `LATEST_ONLY` (GPU ticks, host samples): a log batch or a
        scan carries news the next one does not repeat, and no other event is ever dropped.
        """
        new = self.event
        if not (isinstance(new, Sampled) and sample_role(new.sample) in LATEST_ONLY):
            return False
        if not isinstance(message, CollectorEventReceived):
            return False
        old = message.event
        return (
            isinstance(old, Sampled)
            and old.source == new.source
            and type(old.sample) is type(new.sample)
        )


@dataclass
class RecordingEnding(Message):
    """The recording made from the dashboard has to end (the command exited, --duration)."""

    ended: RecordingEnded


@dataclass
class RecordingClosed(Message):
    """The session directory is closed and its summary written (or why not)."""

    result: RecordResult

"""Digest a W&B run's console (`files/output.log`) as a log, by the code that follows any log."""

from __future__ import annotations

import os

from collectors.logs.logtail_digest import DigestParts, LineDigest
from collectors.logs.logtail_formats import RegistryFormats
from collectors.logs.logtail_lines import LineAssembler

READ_CHUNK_BYTES = 64 * 1024


class ConsoleTail:
    """Reads `files/output.log` of a run directory by offset; lines go through `LineDigest`."""

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, "files", "output.log")
        self.offset = 0
        self._lines = LineAssembler()
        self._digest = LineDigest(RegistryFormats(), self.path)

    def read(self, now: float) -> DigestParts:
        """The metrics and findings of the lines written since the last read."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(READ_CHUNK_BYTES)
        except OSError:
            data = b""  # not written yet (W&B writes it once the run prints)
        self.offset += len(data)
        self._digest.add(self._lines.feed(data), now)
        self._digest.detect_if_due(force=True)
        return self._digest.take()

    def close(self) -> None:
        """Nothing stays open between reads."""

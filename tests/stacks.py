"""Every thread's stack as text, for tests that must fail on a deadlock instead of hanging."""

from __future__ import annotations

import faulthandler
import tempfile


def thread_stacks() -> str:
    """What `faulthandler` prints for every thread (it needs a real file, not pytest's capture)."""
    with tempfile.TemporaryFile("w+") as out:
        faulthandler.dump_traceback(file=out, all_threads=True)
        out.seek(0)
        return out.read()

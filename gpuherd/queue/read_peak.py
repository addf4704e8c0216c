"""The recorded GPU-memory peak of one finished session, for `--vram auto`."""

from __future__ import annotations

from pathlib import Path


def recorded_peak(session_dir: Path) -> int | None:
    """The peak a finished recording in `session_dir` kept; `None` without one."""
    from gpuherd.queue.liveness import read_job_end

    try:
        end = read_job_end(session_dir)
    except OSError:
        return None
    return end.peak_vram_bytes if end is not None else None

"""The writer of a log that is opened and closed at each write, found by its working directory.

Lightning's `CSVLogger` opens `metrics.csv`, appends and closes it again; the Trainer rewrites
`trainer_state.json` the same way. A scan of `/proc/PID/fd` (`collectors.machine.writers`)
almost never
catches such a file open. Both are written under the directory the training runs in
(`lightning_logs/version_3/metrics.csv`, `out/checkpoint-500/trainer_state.json`), so such a
log is tied to the GPU process whose working directory is the log's directory or one of its
`MAX_LEVELS` parents, but only when that settles it:

- the log was written since the previous full scan (an old run's log beside a new run is not
  the new run's);
- the process started before that write;
- one job matches: the processes with the working directory nearest the log are one process
  and its descendants (Lightning's DDP ranks are children of rank 0). Two runs started in one
  directory, or `torchrun`'s sibling workers, leave the log with no writer, as before.

An MLflow file store's metric files are reopened at each write too, three levels below the
store (`written_from`).

The collector asks this only for logs of `parsers.format_sets.REOPENED_FORMATS`: a console log is
held open by whoever writes it, and when that is no GPU process it is not the training's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

MAX_LEVELS = 2
"""How far above the log's directory a working directory may be: `lightning_logs/version_N/`
and `output_dir/checkpoint-N/` are two levels below where the training was started."""


def working_directory(pid: int, proc: str) -> str | None:
    """The real path of `pid`'s working directory; `None` when gone or unreadable."""
    try:
        where = os.readlink(f"{proc}/{pid}/cwd")
    except OSError:
        return None  # gone, or another user's process
    return where if where.startswith("/") and not where.endswith(" (deleted)") else None


def levels_below(directory: str, cwd: str) -> int | None:
    """How many directories `directory` lies below `cwd` (0: the same); `None` if outside."""
    if directory == cwd:
        return 0
    prefix = cwd if cwd.endswith("/") else cwd + "/"
    if not directory.startswith(prefix):
        return None
    return directory[len(prefix) :].count("/") + 1


def written_from(path: str) -> str:
    """The directory a reopened file is written from, which working directories are matched to.

    The file's own directory; for a metric file of an MLflow file store
    (`<store>/<experiment>/<run>/metrics/<key>`, a key with `/` in sub-directories) the
    directory holding the store, where MLflow's default `./mlruns` is made.
    """
    run_dir, found, _key = path.rpartition(f"{os.sep}metrics{os.sep}")
    if found and os.path.isfile(os.path.join(run_dir, "meta.yaml")):
        return os.path.dirname(os.path.dirname(os.path.dirname(run_dir)))
    return os.path.dirname(path)


def job_by_cwd(
    path: str,
    chains: Mapping[int, Sequence[int]],
    proc: str,
    cwds: dict[int, str | None] | None = None,
) -> int | None:
    """The GPU process whose job runs where `path` is written, if one job alone does.

    The caller checks the timing (a write since its last scan, after the process started).

    Args:
        path: the log's real path.
        chains: each GPU pid's ancestors, itself first (`collectors.machine.writers.gpu_chains`).
        proc: the `/proc` to read.
        cwds: pid -> working directory, a cache shared by the logs of one scan.
    """
    cwds = {} if cwds is None else cwds
    directory = written_from(path)
    depth: dict[int, int] = {}
    for pid in chains:
        if pid not in cwds:
            cwds[pid] = working_directory(pid, proc)
        cwd = cwds[pid]
        levels = None if cwd is None else levels_below(directory, cwd)
        if levels is not None and levels <= MAX_LEVELS:
            depth[pid] = levels
    if not depth:
        return None
    nearest = min(depth.values())
    matched = [pid for pid, levels in depth.items() if levels == nearest]
    # one job: a matched process that all the others descend from
    roots = [pid for pid in matched if all(pid in chains[other] for other in matched)]
    return roots[0] if len(roots) == 1 else None

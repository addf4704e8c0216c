"""What a tracker run's reader gives each time it is read, and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.base import CollectorUnavailable
from parsers.model import LogMetric

READ_BUDGET_BYTES = 64 * 1024
"""Most bytes of a run's files read per sample, as a log tail reads
(`collectors.logs.logtail.READ_BUDGET_BYTES`): a backlog is read over several samples without
waiting, and the points of a batch live until the batch is written; the fewer are alive at
once, the less the garbage collector walks (256 KiB batches cost a TensorBoard point about
0.8 us more of CPU in `benchmarks/bench_trackers.py`, whose process holds wandb and
tensorboardX as the dashboard's would)."""

STATUS_EXIT_CODES = {"FINISHED": 0, "FAILED": 1, "KILLED": 128 + 15}
"""A tracker's end state as an exit status (`gpuherd.tasks.tracker` reads 143 as stopped)."""


@dataclass
class RunRead:
    """The new points of one read of a run, and what the run's store says about it."""

    metrics: list[LogMetric] = field(default_factory=list)
    lines: list[tuple[int, str]] = field(default_factory=list)
    """Console lines (W&B's `output.log`), numbered in that file, to parse as a log."""
    label: str | None = None
    """The run as its tracker names it (`demo/good-run`, `version_3`)."""
    status: str | None = None
    """The tracker's state of the run (`RUNNING`, `FINISHED`, `FAILED`, `KILLED`)."""
    file_path: str | None = None
    """The file the training writes (its writer process is looked for by it)."""
    read_bytes: int = 0
    """How far reading has got, summed over the run's files (rows for a database)."""
    size_bytes: int = 0
    modified_at: float | None = None
    more: bool = False
    """A backlog is left: read again without waiting."""
    in_order: bool = True
    """The points come in the order they were logged (else they are put in time order)."""


def missing_extra(what: str, install: str) -> CollectorUnavailable:
    """The one line said when a store is found and the library to read it is not installed."""
    return CollectorUnavailable(f"{what}: install {install} to read it", title="trackers")


def tag_split_name(tag: str) -> str:
    """A tag or key as `metric_name` reads it: `train/loss` -> `train_loss`."""
    return tag.replace("/", "_")

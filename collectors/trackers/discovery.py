"""What a `--watch` walk finds of trackers: run files, and the runs (tasks) they stand for.

`collectors.logs.discovery` asks `tracker_file` about each file it meets and hands the ones that
belong to a tracker's run to a `TrackerRuns` of that scan, which gives each run once.
"""

from __future__ import annotations

import os

from collectors.trackers import stores

TRACKER = "tracker"
"""A file that makes a run known: an event file, an MLflow run's `meta.yaml`, a `.wandb`, an
`mlflow.db`."""
SKIP = "skip"
"""A file inside a W&B run directory: the run's task reads its console, no task of its own."""


def tracker_file(path: str) -> str | None:
    """`TRACKER`, `SKIP` or `None` (a file the walk judges by its own patterns)."""
    name = os.path.basename(path)
    if name in stores.DATABASE_NAMES or stores.is_events_file(name):
        return TRACKER
    inside_wandb = stores.in_wandb_run(path)
    if inside_wandb:
        return TRACKER if name.endswith(".wandb") and name.startswith("run-") else SKIP
    if name == "meta.yaml" and os.path.isdir(os.path.join(os.path.dirname(path), "metrics")):
        return TRACKER
    return None


class TrackerRuns:
    """The runs of one scan's tracker files, each once: (task id, store kind)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def runs(self, path: str) -> list[tuple[str, str]]:
        """The runs `path` (a file `tracker_file` called `TRACKER`) makes known and are new."""
        if os.path.basename(path) in stores.DATABASE_NAMES:
            found = [(run.task_id, run.kind) for run in stores.runs_in_database(path)]
        else:
            run = stores.run_of_file(path)
            found = [] if run is None else [(run.task_id, run.kind)]
        fresh = [(task_id, kind) for task_id, kind in found if task_id not in self._seen]
        self._seen.update(task_id for task_id, _kind in fresh)
        return fresh

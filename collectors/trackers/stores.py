"""Find tracker runs: which store a path is, and the runs (one task each) it holds.

A run's task id is a path: the run directory of a TensorBoard run, an MLflow file-store run
or a W&B run, and `<mlflow.db>#<run uuid>` for a run of an SQLite store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from collectors.trackers.tensorboard import is_events_file

# The readers of each store load on first use, inside the functions below: every dashboard
# and recording imports this module (a `--watch` walk asks it about each file), and most never
# meet a store.

TENSORBOARD = "tensorboard"
MLFLOW_FILE = "mlflow_file"
MLFLOW_SQLITE = "mlflow_sqlite"
WANDB = "wandb"
KINDS = (TENSORBOARD, MLFLOW_FILE, MLFLOW_SQLITE, WANDB)
DATABASE_NAMES = ("mlflow.db",)
"""SQLite files looked into under `--watch` (any name is read when given to `parse`)."""
RUN_SEPARATOR = "#"


@dataclass(frozen=True, slots=True)
class TrackerRun:
    """One run of one store: one task."""

    task_id: str
    kind: str
    label: str | None = None


def run_kind(task_id: str) -> str | None:
    """The store a task id's run lives in, read from the disk; `None` when it is none."""
    base, sep, _run = task_id.rpartition(RUN_SEPARATOR)
    if sep and os.path.isfile(base):
        return MLFLOW_SQLITE
    if not os.path.isdir(task_id):
        return None
    from collectors.trackers import mlflow_files, wandb_run

    if wandb_run.is_run_dir(task_id):
        return WANDB
    if mlflow_files.is_run_dir(task_id):
        return MLFLOW_FILE
    try:
        return TENSORBOARD if any(map(is_events_file, os.listdir(task_id))) else None
    except OSError:
        return None


def runs_in_database(path: str) -> list[TrackerRun]:
    """The runs of an MLflow SQLite store; none when it is no MLflow database."""
    from collectors.trackers import mlflow_sqlite

    if not mlflow_sqlite.is_mlflow_database(path):
        return []
    connection = mlflow_sqlite.connect(path)
    try:
        runs = mlflow_sqlite.list_runs(connection)
    except mlflow_sqlite.sqlite3.Error:
        return []
    finally:
        connection.close()
    return [
        TrackerRun(f"{path}{RUN_SEPARATOR}{run.run_uuid}", MLFLOW_SQLITE, run.label) for run in runs
    ]


def run_of_file(path: str) -> TrackerRun | None:
    """The run a file found by a walk belongs to (its event file, `meta.yaml`, `.wandb`)."""
    name = os.path.basename(path)
    folder = os.path.dirname(path)
    if is_events_file(name):
        return TrackerRun(folder, TENSORBOARD)
    if name.endswith(".wandb") and name.startswith("run-"):
        from collectors.trackers import wandb_run

        if wandb_run.is_run_dir(folder):
            return TrackerRun(folder, WANDB)
    if name == "meta.yaml" and os.path.isdir(os.path.join(folder, "metrics")):
        return TrackerRun(folder, MLFLOW_FILE)
    return None


def in_wandb_run(path: str) -> bool:
    """Whether a file lies inside a W&B run directory (its console is read by the run's task)."""
    parts = path.split(os.sep)
    return any(
        part.startswith(("offline-run-", "run-")) and parent == "wandb"
        for parent, part in zip(parts, parts[1:], strict=False)
    )


def find_runs(path: str, max_depth: int = 6) -> list[TrackerRun]:
    """Every run in a store given by path: a run directory, a store's root or a database."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        return runs_in_database(path)
    kind = run_kind(path)
    if kind is not None:
        return [TrackerRun(path, kind)]
    found: dict[str, TrackerRun] = {}
    level = [path]
    for _depth in range(max_depth):
        deeper = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") and entry.name != ".":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    deeper.append(entry.path)
                elif entry.name in DATABASE_NAMES:
                    found.update((r.task_id, r) for r in runs_in_database(entry.path))
                else:
                    run = run_of_file(entry.path)
                    if run is not None:
                        found.setdefault(run.task_id, run)
        level = deeper
    return sorted(found.values(), key=lambda r: r.task_id)

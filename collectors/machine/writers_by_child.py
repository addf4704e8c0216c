"""The writer of a log that a helper child of the training writes: W&B's `wandb-core`.

wandb hands every record of a run to `wandb-core`, a process the training starts, and that
child writes `run-<id>.wandb`. The writer scan (`collectors.machine.writers`) looks at the GPU
processes and their parents, never their children; for a file of `HELPER_WRITTEN_SUFFIXES`
it also looks at each GPU process's direct children, and a child holding the file for writing
makes its parent, the training, the writer shown (the child is no GPU process of the task).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

HELPER_WRITTEN_SUFFIXES = (".wandb",)
"""Files written by a child of the training rather than the training itself."""


def children(pid: int, proc: str) -> list[int]:
    """The direct children of `pid` (its main thread's, as `/proc` lists them); [] when gone."""
    try:
        with open(f"{proc}/{pid}/task/{pid}/children", "rb") as f:
            return [int(child) for child in f.read().split()]
    except (OSError, ValueError):
        return []  # gone, another user's, or a kernel without the children file


def writers_by_child(
    by_path: Mapping[str, list[str]],
    gpu_pids: Iterable[int],
    proc: str,
    scanned: Collection[int],
    written: Callable[[int, str, Collection[str]], set[str]],
) -> dict[str, list[int]]:
    """Task id -> the GPU processes whose child holds the task's file open for writing.

    Args:
        by_path: real path -> the task ids that read it.
        gpu_pids: the GPU processes.
        proc: the `/proc` to read.
        scanned: pids whose open files were read already (not read again).
        written: `collectors.machine.writers.written_files`.
    """
    paths = [path for path in by_path if path.endswith(HELPER_WRITTEN_SUFFIXES)]
    found: dict[str, list[int]] = {}
    if not paths:
        return found
    for gpu in sorted(set(gpu_pids)):
        for child in children(gpu, proc):
            if child in scanned:
                continue
            for path in written(child, proc, paths):
                for task_id in by_path[path]:
                    found.setdefault(task_id, []).append(gpu)
    return found

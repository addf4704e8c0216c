"""Reading the tasks panel off a tmux capture: the cells of a task's row, by column header."""

from __future__ import annotations

HEADERS = (
    "TASK",
    "STATUS",
    "PROGRESS",
    "LOSS",
    "VAL",
    "SPEED",
    "ETA",
    "GPU",
    "PID",
    "VRAM",
    "HEALTH",
)


def _header(screen: str) -> str | None:
    """The tasks panel's header line (the process table's has no STATUS)."""
    return next(
        (line for line in screen.splitlines() if " TASK " in f" {line} " and "STATUS" in line), None
    )


def task_cells(screen: str, label: str) -> dict[str, str] | None:
    """Column header -> the text under it in the row whose task cell ends with `label`.

    `None` while the panel or the row is not on screen. Cells are cut at the column starts of
    the header line; right-aligned cells (PID, VRAM) sit inside their column's span.
    """
    header = _header(screen)
    if header is None:
        return None
    starts = []
    for name in HEADERS:
        at = header.find(f" {name} ")
        if at < 0 and header.rstrip().endswith(f" {name}"):
            at = header.rstrip().rfind(f" {name}")
        if at >= 0:
            starts.append((at + 1, name))
    starts.sort()
    for line in screen.splitlines():
        if label not in line or line == header:
            continue
        cells = {}
        for i, (at, name) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(line)
            # A right-aligned cell may reach left into its column's padding: take from the end
            # of the previous column's text.
            cells[name] = line[at - 1 : end - 1].strip(" │")
        if cells.get("TASK", "").endswith(label):
            return cells
    return None

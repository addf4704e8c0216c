"""What a column or row name of a table printed in a log stands for: a metric, a count."""

from __future__ import annotations

from parsers.text import STANDARD_NAMES, metric_name, parse_number
from parsers.vocabulary_short import METRIC_WORDS, SHORT_NAMES, SPLIT_FREE, split_and_base

ANCHORS: dict[str, str] = {
    "epoch": "epoch",
    "epochs": "epoch",
    "ep": "epoch",
    "step": "step",
    "steps": "step",
    "global_step": "step",
    "iter": "step",
    "iteration": "step",
    "it": "step",
    "update": "step",
    "updates": "step",
    "total_timesteps": "step",
    "timesteps_total": "step",
    "timesteps": "step",
    "num_timesteps": "step",
    "env_steps": "step",
}
"""Names of the column (or row) that says where a row stands: its epoch or step. `iterations`
(plural) is how many were run, a counter beside the step, not the step."""
# A table repeats the sizes of what it measured on: images, boxes, an image size, counters.
NOT_METRICS = frozenset(
    {
        "instances",
        "images",
        "labels",
        "targets",
        "size",
        "img_size",
        "imgsz",
        "samples",
        "iterations",
        "episodes",
        "n_updates",
        "time_elapsed",
        "elapsed",
        "clip_range",
        "clip_range_vf",
        "count",
        "support",
        "params",
        "param #",
        "#",
    }
)
"""Column names (lower case) whose cells are no metrics: counts, sizes, counters, settings."""
SUMMARY_WORDS = frozenset(
    {
        "param",
        "params",
        "param #",
        "# params",
        "output shape",
        "layer",
        "layer (type)",
        "type",
        "flops",
        "connected to",
        "trainable",
    }
)
"""Column names of a model summary (Keras `Layer (type) | Output Shape | Param #`, Lightning's
`| Name | Type | Params |`, torchinfo): such a table holds no metric, whatever its numbers."""
SUMMARY_LABELS = frozenset(
    {
        "all",
        "mean",
        "average",
        "avg",
        "overall",
        "total",
        "global",
        "summary",
        "macro avg",
        "weighted avg",
    }
)
"""Row labels of a table's summary row (`all` under YOLO's `Class`); rows of single classes are
per-class details, left out."""
TABLE_NAMES: dict[str, str] = {
    "p": "precision",
    "r": "recall",
    "map50-95": "map",
    "map@.5": "map_50",
    "map@.5:.95": "map",
    "map@0.5": "map_50",
    "map@0.5:0.95": "map",
    "map50": "map_50",
    "map_0.5": "map_50",
    "map_0.5:0.95": "map",
    "fps": "throughput/samples_s",
}
"""Column names a table header abbreviates: a detection table's `P` and `R` are precision and
recall, `mAP@.5:.95` the mAP; `fps` (frames, environment steps or images a second)."""
LOSS_PARTS = {
    "box": "box_loss",
    "obj": "obj_loss",
    "cls": "cls_loss",
    "dfl": "dfl_loss",
    "seg": "seg_loss",
    "total": "loss",
}
"""In a training table (one with an epoch or step column) the parts of a detector's loss
(YOLOv5 and YOLOv7's `Epoch gpu_mem box obj cls total labels img_size`)."""
_MEMORY_UNITS = {"G": 1.0, "GB": 1.0, "GiB": 1.0, "M": 1 / 1024, "MB": 1 / 1024, "MiB": 1 / 1024}
"""A cell's memory unit and its scale to GB (`3.2G` under YOLO's `GPU_mem`)."""


_NAMED: dict[tuple[str, str, bool], str | None] = {}
"""`column_name` by its arguments: a log repeats its tables' names. Bounded."""


def column_name(raw: str, split: str, training_table: bool = False) -> str | None:
    """The metric a column or row name stands for; None for a name that is no metric.

    A name the vocabulary knows gets its standard name (`mAP50-95` under a validation header
    is `val/map`, `learning_rate` is `lr`); a name with a metric word gets its split
    (`box_loss` is `train/box_loss`); any other name is kept as printed (`APs`, `AP75`,
    `rollout/ep_len_mean`).

    Args:
        raw: the name as printed.
        split: the split a bare name belongs to (`train` or `val`).
        training_table: whether the table has an epoch or step column (loss parts are named).
    """
    key = (raw, split, training_table)
    try:
        return _NAMED[key]
    except KeyError:
        pass
    if len(_NAMED) >= 2048:
        _NAMED.clear()
    name = _NAMED[key] = _column_name(raw, split, training_table)
    return name


def _column_name(raw: str, split: str, training_table: bool) -> str | None:
    raw = raw.strip()
    low = raw.lower()
    if not low or anchor_of(low) is not None or _is_count(low.rsplit("/", 1)[-1]):
        return None
    field_split, bare = split_and_base(low, split)
    base = TABLE_NAMES.get(bare) or SHORT_NAMES.get(bare)
    if base is None and training_table:
        base = LOSS_PARTS.get(bare)
    if base is not None:
        return base if "/" in base or base in SPLIT_FREE else f"{field_split}/{base}"
    name = metric_name(bare, field_split)
    if name in STANDARD_NAMES:
        return name
    if "/" not in bare and any(word in bare for word in METRIC_WORDS):
        return f"{field_split}/{bare}"
    name = metric_name(raw, field_split)
    return name if name in STANDARD_NAMES else raw


def anchor_of(low: str) -> str | None:
    """`step` or `epoch` for a lower-case name that says where a row stands; else None.

    A section before the name changes nothing (OpenAI Baselines' `misc/total_timesteps`).
    """
    return ANCHORS.get(low.rsplit("/", 1)[-1])


def _is_count(leaf: str) -> bool:
    """A count, a counter or a setting: `Instances`, `n_updates`, `nupdates`, `serial_timesteps`."""
    return (
        leaf in NOT_METRICS
        or leaf.startswith(("n_", "num_", "nupdates"))
        or leaf.endswith("timesteps")
    )


def is_metric_name(raw: str) -> bool:
    """Whether a header names a measured quantity the vocabulary knows (loss, mAP, acc, lr)."""
    low = raw.strip().lower()
    _, bare = split_and_base(low, "val")
    return (
        bare in TABLE_NAMES
        or bare in SHORT_NAMES
        or bare in LOSS_PARTS
        or metric_name(bare, "val") in STANDARD_NAMES
        or any(word in bare for word in METRIC_WORDS)
    )


def cell_value(cell: str, name: str) -> tuple[str, float]:
    """(name, value) of one cell, its unit moved into the name (`3.2G` is `<name>_gb` 3.2).

    Raises:
        ValueError: the cell is no number.
    """
    if cell[-1:].isalpha() and cell[:1].isdigit():
        for unit_length in (3, 2, 1):
            unit = cell[-unit_length:]  # upper case: `5m` may be minutes, `5M` is no time
            if unit in _MEMORY_UNITS and not cell[-unit_length - 1].isalpha():
                number = float(cell[:-unit_length]) * _MEMORY_UNITS[unit]
                return f"{name.rsplit('/', 1)[-1].lower()}_gb", number
    return name, parse_number(cell)

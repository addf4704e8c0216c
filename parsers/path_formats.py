"""Metric files that name their metric in their path: TensorBoard CSV exports, MLflow's store.

Both hold one metric per file and never write its name inside: TensorBoard's "download CSV"
writes `Wall time,Step,Value` rows to `run-<run>-tag-<tag>.csv`, MLflow's file store writes
`<timestamp ms> <value> <step>` lines to `<run>/metrics/<key>`. The parsers here are made for
one file and take the metric's name from its path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from parsers.keyvalue_plans import is_float
from parsers.model import LogMetric
from parsers.text import metric_name, normalise_line
from parsers.values import to_step

TENSORBOARD_HEADER = "wall time,step,value"
"""TensorBoard's scalar CSV header, lower-cased (`Wall time,Step,Value` as it writes it)."""
_TAG_FILE = re.compile(r"^run-(.*)-tag-(.+)\.csv$", re.IGNORECASE)
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_MLFLOW_LINE = re.compile(r"^\d{1,16} \S+(?: -?\d{1,19})?$")
"""`<timestamp ms> <value> [<step>]`: MLflow before 1.0 wrote no step."""


def tensorboard_tag(path: str) -> tuple[str, str]:
    """The run and the scalar's tag from an exported file's name: `("", stem)` otherwise.

    TensorBoard names the export `run-<run>-tag-<tag>.csv` with each `/` of the run and the
    tag written `_` (`run-.-tag-Loss_train.csv` is tag `Loss/train` of run `.`). A run may
    hold `-` (`run-2024-05-01-tag-loss.csv`), a tag rarely does: the last `-tag-` splits.
    A file renamed by hand (`val_loss.csv`) is named after its stem.
    """
    base = os.path.basename(path.replace("\\", "/"))
    found = _TAG_FILE.match(base)
    if found is not None:
        run, _sep, tag = base[len("run-") : -len(".csv")].rpartition("-tag-")
        return run, tag
    stem, _ext = os.path.splitext(base)
    return "", stem


def tensorboard_metric_name(path: str) -> str:
    """The metric an exported scalar is, named by the vocabulary (`parsers.text.metric_name`).

    The run gives the split of a bare tag: Keras writes `epoch_loss` to runs `train` and
    `validation` (`run-validation-tag-epoch_loss.csv` is `val/loss`). A tag written
    `<name>/<split>` (`Loss/train`, exported `Loss_train`) is read as `<split>_<name>`. A tag
    the vocabulary does not know keeps its own name.
    """
    run, tag = tensorboard_tag(path)
    split = _RUN_SPLITS.get(run.rsplit("_", 1)[-1].lower(), "train")
    for key in _tag_spellings(tag):
        name = metric_name(key, split)
        if name != key:
            return name
    return metric_name(tag, split)


_RUN_SPLITS = {
    "train": "train",
    "training": "train",
    "validation": "val",
    "val": "val",
    "valid": "val",
    "eval": "val",
    "test": "test",
}
"""The split a run's last part names (Keras' `train` and `validation` runs)."""


def _tag_spellings(tag: str) -> list[str]:
    """The tag, then `<split>_<name>` for a `<name>_<split>` tag, then without Keras' `epoch_`."""
    spellings = [tag]
    head, _sep, last = tag.rpartition("_")
    if head and last.lower() in _RUN_SPLITS:
        spellings.append(f"{last}_{head}")
    if tag.lower().startswith("epoch_"):
        spellings.append(tag[len("epoch_") :])
    return spellings


def is_tensorboard_csv(lines: Sequence[str], path: str) -> bool:
    """A TensorBoard export: its header, or (no text yet) its `run-...-tag-...csv` name."""
    head = next((line for line in lines if line.strip()), None)
    if head is None:
        return _TAG_FILE.match(os.path.basename(path)) is not None
    return head.lstrip("\ufeff").strip().lower() == TENSORBOARD_HEADER


def mlflow_metric_key(path: str) -> str | None:
    """The metric key of a file in MLflow's file store: the path below the run's `metrics/`.

    `mlruns/0/<run id>/metrics/train/loss` is `train/loss` (a key with `/` is nested
    directories). The `metrics` directory after a 32-hex run id is taken, else the first
    one of the path: a key may itself hold a `metrics` part.
    """
    parts = [part for part in path.replace("\\", "/").split("/") if part not in ("", ".")]
    places = [i for i, part in enumerate(parts[:-1]) if part == "metrics"]
    if not places:
        return None
    after_run = [i for i in places if i > 0 and _RUN_ID.match(parts[i - 1])]
    start = (after_run or places)[0] + 1
    return "/".join(parts[start:])


def is_mlflow_metric_file(lines: Sequence[str], path: str) -> bool:
    """A metric file of MLflow's store: under a `metrics/` directory, `<ms> <value> <step>` lines.

    A file with no text yet counts when its path has a run id or an `mlruns` directory above
    `metrics/`.
    """
    if "metrics" not in path or mlflow_metric_key(path) is None:
        return False
    written = [line.strip() for line in lines if line.strip()][:20]
    if not written:
        unixy = "/" + path.replace("\\", "/")
        return "/mlruns/" in unixy or _has_run_id(unixy)
    # the last line may still be being written: judge the complete ones when there are some
    judged = written[:-1] or written
    return all(_MLFLOW_LINE.match(line) and is_float(line.split(" ")[1]) for line in judged)


def _has_run_id(path: str) -> bool:
    parts = path.split("/")
    return any(_RUN_ID.match(a) and b == "metrics" for a, b in zip(parts, parts[1:], strict=False))


class TensorBoardCsvParser:
    """Rows of a TensorBoard scalar export: one metric each, named from the file's name.

    `Wall time` is the row's `taken_at`, `Step` its step. Rows are read in file order: a run
    resumed from a checkpoint shows its steps going back (2454, then 41, 96, ...), and both
    stretches are kept as they are, each row at its own step and time.
    """

    def __init__(self, path: str = "") -> None:
        self.name = tensorboard_metric_name(path) if path else "value"
        self._header_seen = False

    def feed(self, line: str) -> LogMetric | None:
        """Parse the header or one row.

        Raises:
            ValueError: a row that is not `wall time,step,value` numbers (a cut last line
                whose value is missing counts here too).
        """
        line = normalise_line(line).strip()
        if not line:
            return None
        if not self._header_seen:
            self._header_seen = True
            if line.lstrip("\ufeff").lower() == TENSORBOARD_HEADER:
                return None
        if line.lower() == TENSORBOARD_HEADER:
            return None  # a second export appended to the first
        cells = line.split(",")
        if len(cells) != 3:
            raise ValueError(f"a TensorBoard row has 3 cells, this one {len(cells)}")
        wall, step, value = (float(cell) for cell in cells)
        return LogMetric(((self.name, value),), to_step(step), taken_at=wall)

    def reset(self) -> None:
        """Wait for the header again (the file was replaced)."""
        self._header_seen = False


class MlflowMetricParser:
    """Lines of one MLflow metric file: `<timestamp ms> <value> <step>`, named by its path.

    MLflow appends a line per `log_metric` call, so steps may repeat or go back (a resumed
    run logging into the same run id); every line is kept, in file order. MLflow before
    0.9 wrote no step: a file whose first line has two fields is read that way; in a file of
    three, a line of two is one cut short (still being written) and is not read.
    """

    def __init__(self, path: str = "") -> None:
        key = mlflow_metric_key(path) if path else None
        if key is None and path:
            key = os.path.basename(path.replace("\\", "/"))
        self.name = metric_name(key) if key else "value"
        self._fields: int | None = None

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line.

        Raises:
            ValueError: a line that is not two or three numbers (garbage), or two in a file
                of three (a line cut short).
        """
        cells = normalise_line(line).split()
        if not cells:
            return None
        if len(cells) not in (2, 3) or len(cells) < (self._fields or 0):
            raise ValueError(
                f"an MLflow metric line has {self._fields or '2 or 3'} fields, "
                f"this one {len(cells)}"
            )
        millis, value = int(cells[0]), float(cells[1])
        step = int(cells[2]) if len(cells) == 3 else None
        self._fields = self._fields or len(cells)
        return LogMetric(((self.name, value),), step, taken_at=millis / 1000.0)

    def reset(self) -> None:
        """Forget how many fields the file's lines have (the file was replaced)."""
        self._fields = None

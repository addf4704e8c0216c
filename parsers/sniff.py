"""Content tests that name a log's format from its text, whatever the file is called."""

from __future__ import annotations

import csv
from collections.abc import Sequence

from parsers.table_formats import EPOCH_COLUMNS, MISSING_CELLS, STEP_COLUMNS

TRAINER_STATE_KEY = '"log_history"'

_STEP_OR_EPOCH = STEP_COLUMNS | EPOCH_COLUMNS


def is_trainer_state(raw_lines: Sequence[str]) -> bool:
    """A Hugging Face `TrainerState` document: a JSON object with a `log_history` key.

    The Trainer writes it with `indent=2, sort_keys=True`, so the key comes within the first
    dozen lines; a compact dump has it on its one line. Raw lines are looked at: a normalised
    line is cut at 10,000 characters.
    """
    first = next((line for line in raw_lines if line.strip()), "")
    if not first.lstrip("\ufeff").lstrip().startswith("{"):
        return False
    return any(TRAINER_STATE_KEY in line for line in raw_lines)


def csv_header_columns(lines: Sequence[str]) -> list[str] | None:
    """The column names of a metrics CSV, from its header line and first row; else `None`.

    A metrics CSV (Keras `CSVLogger`, whose default file name is `training.log`; a pandas
    history; SB3's `progress.csv`, stepped by `time/total_timesteps`; any `*.csv`) names an
    epoch or step column and at least one other, in a header of plain names, and its first
    data row (when written yet) has no more cells than the header and numbers or
    missing-value words only.
    """
    rows = [line for line in lines if line.strip()][:2]
    if not rows:
        return None
    head = _cells(rows[0].lstrip("\ufeff"))
    if head is None or len(head) < 2:
        return None
    names = [cell.strip().lower() for cell in head]
    if _STEP_OR_EPOCH.isdisjoint(names) or not all(_is_column_name(n) for n in names if n):
        return None
    if len(rows) > 1:
        row = _cells(rows[1])
        if row is None or len(row) > len(head) or not all(_is_cell(c) for c in row):
            return None
    return names


def _cells(line: str) -> list[str] | None:
    if "," not in line:
        return None
    try:
        return next(csv.reader([line]))
    except csv.Error:
        return None


def _is_column_name(name: str) -> bool:
    # `val_accuracy`, `train/box_loss`, `metrics/mAP50(B)`, `lr-SGD`: no blanks inside, no
    # sentence punctuation; a log line with commas (`Epoch 1, loss 0.5`) fails here
    return len(name) <= 64 and " " not in name and not name.endswith((".", ":"))


def _is_cell(cell: str) -> bool:
    text = cell.strip()
    if text.lower() in MISSING_CELLS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def is_detr_log(lines: Sequence[str]) -> bool:
    """A DETR/DeiT/MAE-style `log.txt`: one `log_stats` JSON object per epoch.

    Their `main.py` writes `{**train_stats, **test_stats, "epoch": ..., "n_parameters": ...}`
    with `train_` keys first, the learning rate leading (`add_meter('lr')` comes first).
    """
    return any(line.startswith('{"train_lr": ') and '"train_loss"' in line for line in lines)

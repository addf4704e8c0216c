"""Sets of format names by how their files are written; no parser is imported here.

`collectors.machine.writers` reads `REOPENED_FORMATS` on the live dashboard's start-up path,
where the
parsers (`parsers.registry`) are not loaded yet.
"""

from __future__ import annotations

DOCUMENT_FORMATS: frozenset[str] = frozenset({"hf_trainer_state", "json_document"})
"""Formats that are whole JSON documents rewritten in place, parsed with
`parsers.json_document.read_document` after each change instead of line by line."""

CSV_FORMATS: frozenset[str] = frozenset(
    {"lightning_csv", "timm_csv", "ultralytics_csv", "csv", "tensorboard_csv"}
)
"""Formats whose first line is their header: told from a file's first lines only."""

PATH_NAMED_FORMATS: frozenset[str] = frozenset({"tensorboard_csv", "mlflow"})
"""Formats of one metric a file, named by the file's path, not its text (TensorBoard's CSV
export `run-<run>-tag-<tag>.csv`, MLflow's `<run>/metrics/<key>`): their parser is made for
one path (`make_parser(..., path=...)`)."""

REOPENED_FORMATS: frozenset[str] = (
    CSV_FORMATS
    | DOCUMENT_FORMATS
    | frozenset({"jsonl", "llamafactory", "mmengine_json", "detr_json", "mlflow"})
)
"""Formats whose writers usually open the file, write and close it again at each write
(Lightning's `CSVLogger`, the Trainer's `trainer_state.json`, MLflow's metric files,
LLaMA-Factory's `trainer_log.jsonl`, mmengine's `scalars.json`, DETR's `log.txt`): a scan of
open files rarely catches them, so their writer is also looked for by working directory
(`collectors.machine.writers_by_cwd`). Not the console formats, whose log the training's stdout
holds
open, nor detectron2's `metrics.json`, which its `JSONWriter` holds open."""

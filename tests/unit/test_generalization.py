"""Generalization floors: the generic reader alone, and each family without its own parser.

`benchmarks/bench_generalization.py` scores the hand-read logs with the framework parsers off
(and with each log's own family's parsers off); these floors are its figures when they were
written, so a change that reads less of them turns this red. A change that reads more
should raise the floors (run the benchmark with `--write-results` and copy its counts).
A new log in a new family has no floor until one is added here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from parsers.registry import FRAMEWORK_FORMATS
from tests.unit.test_parsers_hand_read import Read

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_generalization.py"
_spec = importlib.util.spec_from_file_location("bench_generalization", SCRIPT)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_generalization"] = bench
_spec.loader.exec_module(bench)

FLOORS: dict[str, tuple[int, int]] = {
    # family: values found (generic alone, leave one family out)
    "axolotl": (5, 5),
    "baselines": (4, 4),
    "catboost": (3, 3),
    "cgcnn": (4, 4),
    "deit_json": (2, 2),
    "detectron2": (10, 10),
    "detectron2_json": (9, 9),
    "detr_json": (2, 2),
    "fairseq": (8, 8),
    "fasttext": (4, 4),
    "gcpnet": (4, 4),
    "generic": (19, 19),
    "handloop": (3, 3),
    "handwritten": (18, 18),
    "hf_trainer": (42, 42),
    "hf_trainer_state": (7, 7),
    "hf_trainoutput": (1, 1),
    "joeynmt": (10, 10),
    "jsonl": (6, 6),
    "kan_gpt": (8, 8),
    "keras": (17, 17),
    "keras2": (7, 7),
    "keras_csv": (7, 7),
    "lightning_csv": (5, 5),
    "lightning_rich": (11, 11),
    "llamafactory": (4, 4),
    "llmc": (4, 4),
    "marian": (17, 17),
    "megatron": (15, 15),
    "metric_logger": (10, 10),
    "mmcv": (12, 12),
    "mmengine": (1, 1),
    "mmengine_json": (3, 3),
    "mmseg": (5, 5),
    "modded_nanogpt": (5, 5),
    "nanogpt": (5, 5),
    "nnunet": (2, 2),
    "opennmt": (7, 7),
    "paddle": (26, 26),
    "painn": (2, 2),
    "pandas_csv": (9, 9),
    "raytune": (0, 0),
    "sacrebleu": (0, 0),
    "sb3": (26, 26),
    "simple_nmt": (10, 10),
    "sklearn_score": (3, 3),
    "speechbrain": (15, 15),
    "spinningup": (5, 5),
    "tensorboard_csv": (0, 0),
    "tf_siamese": (3, 3),
    "timm_csv": (8, 8),
    "tqdm": (24, 24),
    "trl": (25, 25),
    "trl_grpo": (23, 23),
    "tsetlin": (4, 4),
    "ultralytics": (8, 8),
    "ultralytics_csv": (5, 5),
    "xgboost": (4, 4),
    "xnmt": (4, 4),
    "yolov5": (18, 18),
}
"""Of 597 values read by eye: 528 found by the generic reader alone (88.4 %), 528 leaving
each family out (no framework parser reads another family's log better than the generic
reader). 170 of them are in logs of frameworks with no parser (`UNSEEN`), where the generic
reader is all there is: 159 found (94 of 95 on the logs the rules were developed on, 65 of 75
on those still held out; 65 of 80 before Python's `date - name - LEVEL -` prefix was read,
which took one held-out log out of the held-out set). 321 of 511 before the record reader
read pipe records and anchors, printed mappings (`parsers.mapping_line`) and record documents
were read, and tables were read whole (`parsers.table_lines`)."""
UNACCOUNTED_CEILING = {"generic alone": 249, "leave one family out": 249}
"""Values reported that neither a reading nor the full parse has on their line (245 before the
record reader: it left out 6 config values and added Keras's ms/step and SB3 table values read
on the table's own lines; 254 before it read Megatron, fairseq and PaddleClas records, whose
parsers leave out PaddleClas's `batch_cost` (6, a step time) and fairseq's `best_accuracy`;
then 249 once tables were read whole: SB3's rows are no longer read one by one, away from the
table's step)."""


@pytest.fixture(scope="module")
def scores() -> dict[str, Any]:
    return bench.measure()


@pytest.mark.parametrize("mode", ["generic alone", "leave one family out"])
def test_no_family_reads_less_than_its_floor(scores: dict[str, Any], mode: str) -> None:
    index = bench.MODES.index(mode) - 1
    got = {family: scores[mode].per_family[family][0] for family in FLOORS}
    assert got == {family: max(got[family], floor[index]) for family, floor in FLOORS.items()}
    unaccounted = sum(sum(scores[mode].unaccounted.get(f, {}).values()) for f in FLOORS)
    assert unaccounted <= UNACCOUNTED_CEILING[mode]


@pytest.mark.parametrize("mode", ["generic alone", "leave one family out"])
def test_at_least_four_values_in_five_are_found_without_their_framework_parser(
    scores: dict[str, Any], mode: str
) -> None:
    found = sum(got for got, _ in scores[mode].per_family.values())
    read = sum(total for _, total in scores[mode].per_family.values())
    assert read >= 500 and found / read >= 0.80, (found, read)


def test_every_floored_family_is_still_hand_read(scores: dict[str, Any]) -> None:
    assert set(FLOORS) <= set(scores["generic alone"].per_family)
    # in process, all parsers on, the figure of bench_parse_recall.py: every reading of a
    # framework with a parser found; of those without one, what the generic reader finds
    per_family = scores["all parsers"].per_family
    unseen = {bench.family_of(key) for key in bench.UNSEEN}
    assert all(
        found == read for family, (found, read) in per_family.items() if family not in unseen
    )


def test_the_framework_parsers_are_really_off(scores: dict[str, Any]) -> None:
    alone = scores["generic alone"].formats
    assert alone and not set(alone.values()) & FRAMEWORK_FORMATS
    everything, left_out = scores["all parsers"].formats, scores["leave one family out"].formats
    own = {(bench.family_of(key), f) for key, f in everything.items() if f in FRAMEWORK_FORMATS}
    assert own, "no log was read by a framework parser with all parsers on"
    assert not {(bench.family_of(key), f) for key, f in left_out.items()} & own
    # another family's parser may take a log whose own is off: pandas' CSV reads as timm's
    assert left_out["pandas_csv/history.csv"] == "timm_csv"


RECORDS = [
    {"line": 3, "metric": "train/loss", "value": 0.5, "step": 30},
    {"line": 3, "metric": "lr", "value": 0.001, "step": 30},
    {"line": 3, "metric": "val/acc", "value": 0.9, "step": 30},
]


@pytest.mark.parametrize(
    ("read", "cause"),
    [
        (Read(3, "train/loss", 0.5, step=31), "wrong step"),
        (Read(3, "train/acc", 0.9), "wrong side"),
        (Read(3, "learning_rate", 0.001), "name differs"),
        (Read(3, "grad_norm", 0.7), "value missed"),
        (Read(4, "train/loss", 0.5), "line not read"),
    ],
)
def test_each_miss_gets_its_cause(read: Read, cause: str) -> None:
    on_line = [r for r in RECORDS if r["line"] == read.line]
    assert not bench.found(read, on_line)
    assert bench.cause(read, on_line) == cause

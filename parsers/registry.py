"""The ordered list of log formats, format detection and parser construction."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from parsers.fairseq import parse_fairseq_line
from parsers.format_sets import CSV_FORMATS, DOCUMENT_FORMATS, PATH_NAMED_FORMATS
from parsers.framework_formats import (
    Detectron2Parser,
    MmengineJsonParser,
    parse_detectron2_json_line,
    parse_mmengine_line,
)
from parsers.generic_context import GenericParser, TablesBeside
from parsers.hf_trainer import HfTrainerParser
from parsers.json_document import RECORD_DOCUMENT, is_record_document
from parsers.json_records import parse_jsonl_line
from parsers.keyvalue import parse_plain_line
from parsers.line_parser import CheckedParser, LineParser, StatelessParser
from parsers.megatron import parse_megatron_line
from parsers.paddle import parse_paddle_line, parse_paddle_plain_line
from parsers.path_formats import (
    MlflowMetricParser,
    TensorBoardCsvParser,
    is_mlflow_metric_file,
    is_tensorboard_csv,
)
from parsers.progress_formats import KerasParser, RichBarParser, UltralyticsParser
from parsers.record_formats import parse_detr_json_line, parse_llamafactory_line
from parsers.sb3 import Sb3Parser
from parsers.simple_formats import parse_metric_logger_line, parse_nanogpt_line
from parsers.sniff import csv_header_columns, is_detr_log, is_trainer_state
from parsers.table_formats import CsvParser
from parsers.text import normalise_line
from parsers.tqdm_bar import TqdmParser

Detect = Callable[[Sequence[str], str], bool]
"""detect(normalised sample lines, file path) -> whether the sample is in this format."""


def _any_line(pattern: str) -> Detect:
    regex = re.compile(pattern)
    return lambda lines, _name: any(regex.search(line) for line in lines)


def _csv_header(*columns: str) -> Detect:
    def detect(lines: Sequence[str], name: str) -> bool:
        head = next((line for line in lines if line.strip()), "").lstrip("\ufeff").split(",")
        return all(c in head for c in columns) and _is_csv(lines, name)

    return detect


def _is_csv(lines: Sequence[str], name: str) -> bool:
    """A `.csv` file, or any file whose first lines are a metrics CSV (content decides)."""
    return not name or name.endswith(".csv") or csv_header_columns(lines) is not None


def _json_keys(*keys: str) -> Detect:
    def detect(lines: Sequence[str], _name: str) -> bool:
        records = [line for line in lines if line.lstrip().startswith('{"')]
        return bool(records) and any(all(f'"{k}"' in r for k in keys) for r in records)

    return detect


def _stateless(parse_line: Callable[[str], object]) -> Callable[[], LineParser]:
    return lambda: StatelessParser(parse_line)  # type: ignore[arg-type]


FORMATS: tuple[tuple[str, Detect, Callable[[], LineParser]], ...] = (
    ("tensorboard_csv", is_tensorboard_csv, TensorBoardCsvParser),
    ("mlflow", is_mlflow_metric_file, MlflowMetricParser),
    ("lightning_csv", _csv_header("epoch", "step"), CsvParser),
    ("timm_csv", _csv_header("epoch", "train_loss"), CsvParser),
    ("ultralytics_csv", _csv_header("epoch", "train/box_loss"), CsvParser),
    (
        "csv",
        lambda lines, name: name.endswith(".csv") or csv_header_columns(lines) is not None,
        CsvParser,
    ),
    ("detr_json", lambda lines, _name: is_detr_log(lines), _stateless(parse_detr_json_line)),
    (
        "llamafactory",
        _json_keys("current_steps", "total_steps"),
        _stateless(parse_llamafactory_line),
    ),
    ("detectron2_json", _json_keys("iteration"), _stateless(parse_detectron2_json_line)),
    (
        "mmengine_json",
        lambda lines, name: (
            _json_keys("step", "data_time")(lines, name) or _json_keys("mode", "epoch")(lines, name)
        ),
        MmengineJsonParser,
    ),
    ("jsonl", _json_keys(), _stateless(parse_jsonl_line)),
    (
        "mmengine",
        _any_line(
            r" - mmengine - |(?:Epoch|Iter)\((?:train|val)\)\s+\["
            r"| - \w+ - INFO - (?:Epoch|Iter) \[\d"  # the mmcv 1.x runner
        ),
        _stateless(parse_mmengine_line),
    ),
    (
        "detectron2",
        _any_line(r"\bd2\.(?:utils|engine|data|evaluation|checkpoint)\."),
        Detectron2Parser,
    ),
    ("sb3", _any_line(r"^\|\s+total_timesteps\s+\|\s*[\d.e+]+\s*\|$"), Sb3Parser),
    ("ultralytics", _any_line(r"^Ultralytics |^\s+Epoch\s+(?i:gpu_mem)\s"), UltralyticsParser),
    ("lightning_rich", _any_line(r"^\S.*\s\d+/(?:\d+|\?) [\d:]+ • "), RichBarParser),
    ("keras", _any_line(r"^\s*\d+/\d+ .*\d+(?:ms|s|us)/(?:step|sample)\b"), KerasParser),
    (
        "nanogpt",
        _any_line(r"^iter \d+: loss \S+, time [\d.]+ms|^step \d+: train loss "),
        _stateless(parse_nanogpt_line),
    ),
    (
        "megatron",
        _any_line(
            r"^\s*(?:\[[^\]]*\]\s*)?iteration\s+\d+/\s*\d+\s*\|"
            r"|validation loss at iteration \d+|\[Rank \d+\] step=\d+, skipped="
            r"|RunningAvgSamplesPerSec="
        ),
        _stateless(parse_megatron_line),
    ),
    (
        "fairseq",
        _any_line(
            r"(?:^|\| )epoch \d+ \| (?:valid on|\w+ [-+\d.])|valid on '[^']*' subset \|"
            r"|(?:^|\| )epoch \d+:\s+\d+ / \d+ \w+="
        ),
        _stateless(parse_fairseq_line),
    ),
    (
        "paddle",
        _any_line(r" ppocr INFO: (?:epoch: \[|cur metric)| INFO: \[(?:Train|Eval)\]\[Epoch \d+"),
        _stateless(parse_paddle_line),
    ),
    (
        "metric_logger",
        _any_line(r"\]\s+eta: [\d:]+|^Train: \d+ \[\s*\d+/|^Test: \[\s*\d+/"),
        _stateless(parse_metric_logger_line),
    ),
    (
        "hf_trainer",
        # a dict may follow a bar on its line when redraws ran together; TRL's PPO and RLOO
        # dicts open with episodes a second
        _any_line(
            r"(?:^\s*|\]\s*)\{'(?:loss'|eval_loss'|train_runtime'|learning_rate'"
            r"|eps': \d+, 'objective/)"
        ),
        HfTrainerParser,
    ),
    (
        "tqdm",
        _any_line(r"\[\d+:\d\d(?::\d\d)?(?:<[\d:?]+)?, *(?:[\d.?]+\S*/s|[\d.]+s/\S+)"),
        TqdmParser,
    ),
    ("generic", lambda lines, name: True, GenericParser),
)
"""(name, detect, factory), most specific first; detection takes the first that says yes."""

FORMAT_NAMES: tuple[str, ...] = tuple(name for name, _, _ in FORMATS) + (
    "hf_trainer_state",
    RECORD_DOCUMENT,
)
"""Every name `make_parser` and `--format` accept."""

LATE_FORMATS: frozenset[str] = frozenset(
    name
    for name, _, _ in FORMATS
    if name != "generic" and name not in CSV_FORMATS and name not in PATH_NAMED_FORMATS
)
"""Line formats a log may turn out to be after its first lines gave no metric (banners, then a
progress bar or JSON records; see `detect_late_format`). Not the CSV formats, whose header is
the file's first line, not the metric files named by their path (one metric from the first
line), and not documents, which are whole files from their first byte."""

LATE_DETECT_LINES = 10_000
"""Lines after the first ones of a `generic` log without a metric so far (banners, warnings)
that are still checked for a console format, block by block (`detect_late_format`)."""

PLAIN_LINE_FORMATS: frozenset[str] = LATE_FORMATS - {"mmengine", "detectron2"}
"""Console formats whose other lines go to the generic parser (see `make_parser`): the
progress bars and printed dicts of scripts that also print lines of their own. The mmengine
and detectron2 loggers report every metric through their own lines and open with an
environment and config dump (`seed: 0`, `C++ Version: 202002`) that would read as metrics."""

FRAMEWORK_FORMATS: frozenset[str] = frozenset(FORMAT_NAMES) - {
    "csv",
    "jsonl",
    "tqdm",
    "generic",
    RECORD_DOCUMENT,
}
"""Formats named after one framework or program (its logger, its files); the other five read
any program's output. `detect_format(..., off=...)` can leave any of them out: the
generalization benchmark scores the reader without them (benchmarks/bench_generalization.py)."""

TABLE_FORMATS: frozenset[str] = frozenset({"tqdm"})
"""Console formats that know no framework whose logs' tables are read beside them (see
`generic_context.TablesBeside`): YOLOv5 prints its table rows before its tqdm bars. The
`generic` format reads tables itself."""

_FACTORIES = {name: factory for name, _, factory in FORMATS}
_PATH_FACTORIES: dict[str, Callable[[str], LineParser]] = {
    "tensorboard_csv": TensorBoardCsvParser,
    "mlflow": MlflowMetricParser,
}
_PLAIN_LINES = {"paddle": parse_paddle_plain_line}
"""Formats whose other lines need more than `parse_plain_line`: Paddle's config dump."""


def detect_format(
    sample_lines: Sequence[str], path: str | None = None, off: frozenset[str] = frozenset()
) -> str:
    """Guess the format of a log from its first lines and its path; falls back to `generic`.

    The text decides first: a JSON object with `log_history` is `hf_trainer_state`, any other
    pretty-printed JSON document that may hold a list of records `json_document`, a metrics
    CSV header is CSV and JSON records are JSON whatever the file is called; the name decides
    only what the text leaves open (`trainer_state.json` still being written, an empty
    `metrics.csv`).

    Args:
        sample_lines: the first lines of the file (a few dozen is plenty), raw or normalised.
        path: the file's path, when known.
        off: formats never detected (`FRAMEWORK_FORMATS` to read with the generic ones only).
    """
    name = os.path.basename(path) if path else ""
    if "hf_trainer_state" not in off and (
        is_trainer_state(sample_lines) or name == "trainer_state.json"
    ):
        return "hf_trainer_state"
    if RECORD_DOCUMENT not in off and is_record_document(sample_lines):
        return RECORD_DOCUMENT
    lines = [normalise_line(line) for line in sample_lines]
    for format_name, detect, _ in FORMATS:
        if format_name not in off and detect(lines, path or ""):
            return format_name
    return "generic"


def detect_late_format(
    lines: Sequence[str], path: str | None = None, off: frozenset[str] = frozenset()
) -> str | None:
    """The line format among `LATE_FORMATS` that later lines of a `generic` log show.

    For a log whose first lines gave no format but `generic` and no metric either (a
    command's output: banners, warnings, then a progress bar or JSON records), so that the
    parser can still change; `None` when these lines show none of them.
    """
    normalised = [normalise_line(line) for line in lines]
    for format_name, detect, _ in FORMATS:
        if (
            format_name in LATE_FORMATS
            and format_name not in off
            and detect(normalised, path or "")
        ):
            return format_name
    return None


def make_parser(name: str, plain_lines: bool = True, path: str | None = None) -> LineParser:
    """A fresh parser for the named line format, behind the `CheckedParser` boundary.

    Its `feed` returns `None` or a metric that obeys `parsers.values.check_metric`, and
    raises nothing but `ValueError` (count the line as unparsed and go on). A console format
    of `PLAIN_LINE_FORMATS` hands the lines it does not claim and that name a known metric or
    counter to the generic parser (`keyvalue.parse_plain_line`): a script that shows a
    progress bar also prints its own `step=45 loss=nan` and `val_acc=0.83` lines.
    `plain_lines=False` leaves them out: the format's own lines only (a format forced with
    `gpuherd parse --format`, which says when it matched no line). A format of
    `PATH_NAMED_FORMATS` names its metric from `path` (the file the parser is for).

    Raises:
        ValueError: an unknown name, or a document format (see `DOCUMENT_FORMATS`).
    """
    if name in DOCUMENT_FORMATS:
        raise ValueError(f"{name} is a document format: use read_document on the file")
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown log format {name!r}; known: {', '.join(FORMAT_NAMES)}")
    if name in PATH_NAMED_FORMATS:
        return CheckedParser(_PATH_FACTORIES[name](path or ""))
    plain = _PLAIN_LINES.get(name, parse_plain_line) if name in PLAIN_LINE_FORMATS else None
    if name in TABLE_FORMATS:
        return CheckedParser(TablesBeside(factory(), plain if plain_lines else None))
    if not plain_lines or plain is None:
        return CheckedParser(factory())
    return CheckedParser(factory(), plain)

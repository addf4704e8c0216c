"""JSON documents that hold a list of metric records, read record by record by their structure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from parsers import safe_json
from parsers.hf_trainer import read_trainer_state
from parsers.mapping_line import mapping_to_metric
from parsers.model import LogMetric
from parsers.values import check_metric

RECORD_DOCUMENT = "json_document"
"""The generic document format: any program's JSON document whose top level holds records."""
_LIST_OPENS = re.compile(r'\s*"[^"\\]*":\s*\[\s*(?:\{\s*)?$')
"""A pretty-printed key whose value, a list, opens on the lines below (`  "log_history": [`)."""
_JSON_LINE = re.compile(r'[\[\]{}"\d-]|(?:true|false|null|NaN|-?Infinity)\b')
"""How every line of pretty-printed JSON starts (stripped): a bracket, a key or string, a
number or a constant. A log that prints its configuration as JSON first goes on with lines
of its own (`Epoch 1 ...`), which do not."""


def is_record_document(raw_lines: Sequence[str]) -> bool:
    """A pretty-printed JSON document whose top level may hold a list of records.

    Its first line opens an array, or an object one of whose keys opens a list on its own line
    (`trainer_state.json`'s `"log_history": [`, a history dump's `"train": [`). A JSON object
    on one line is a JSON-lines log, which the line formats read, and a log that opens with
    a configuration printed as JSON goes on with lines that are no JSON.
    """
    lines = [line.strip() for line in raw_lines[:64] if line.strip()]
    if not lines or not all(_JSON_LINE.match(line) for line in lines):
        return False
    first = lines[0].lstrip("\ufeff")
    if first in ("[", "[{"):
        return len(lines) == 1 or lines[1].startswith(("{", '"'))
    return first == "{" and any(_LIST_OPENS.match(line) for line in lines[1:])


def read_record_document(text: str) -> tuple[list[LogMetric], list[tuple[int, str]]]:
    """The metrics of a document's records, and its unparsed records.

    The records are the document itself when it is a list, else the longest list of objects
    among its top-level values. Each record is read as a printed mapping is
    (`parsers.mapping_line.mapping_to_metric`): numbers and numeric strings, nested objects
    flattened with `/`, settings-only records left out.

    Returns:
        The metrics, oldest first, and (1-based index among the records, reason) per unparsed
        record.

    Raises:
        ValueError: the text is not JSON (or nests deeper than `safe_json.MAX_DEPTH`).
    """
    document = safe_json.loads(text)
    metrics: list[LogMetric] = []
    unparsed: list[tuple[int, str]] = []
    for number, record in enumerate(_records(document), 1):
        try:
            metric = mapping_to_metric(record)
            if metric is not None:
                metrics.append(check_metric(metric))
        except ValueError as error:
            unparsed.append((number, str(error)))
    return metrics, unparsed


def read_document(name: str, text: str) -> tuple[list[LogMetric], list[tuple[int, str]]]:
    """The metrics and unparsed records of a document in format `name`.

    Raises:
        ValueError: the text is not JSON, or not the document `name` says.
    """
    if name == RECORD_DOCUMENT:
        return read_record_document(text)
    return read_trainer_state(text)


def _records(document: object) -> list[dict[str, object]]:
    """The document's records: itself as a list, or its longest top-level list of objects."""
    if isinstance(document, list):
        return [item for item in document if isinstance(item, dict)]
    if not isinstance(document, dict):
        return []
    best: list[dict[str, object]] = []
    for value in document.values():
        if isinstance(value, list):
            records = [item for item in value if isinstance(item, dict)]
            if len(records) > len(best):
                best = records
    return best

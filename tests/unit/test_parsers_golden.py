"""Golden tests: every real log excerpt under tests/data/logs parses to its committed result.

Regenerate after a deliberate change with
`GPUHERD_UPDATE_GOLDEN=1 pytest tests/unit/test_parsers_golden.py` (the updated tests skip: they
compare nothing), read the diff, then run again without it. The golden files are the code's own
output; `test_parsers_hand_read.py` backs each one with values read off the log by eye.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from collectors.logs.logtail_lines import read_lines
from gpuherd.parse.parse_command import json_number
from parsers.findings import findings_from_metric, scan_line
from parsers.hf_trainer import parse_trainer_state
from parsers.registry import DOCUMENT_FORMATS, FORMAT_NAMES, detect_format, make_parser

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
LOGS = sorted(
    p
    for p in DATA.glob("*/*")
    if p.is_file()
    and not p.name.endswith(".expected.json")
    and p.parent.name != "make_logs"
    and p.suffix != ".md"
)


pytestmark = pytest.mark.usefixtures("utc_clock")  # logs stamp local time, no zone


def _expected_path(log: Path) -> Path:
    return log.with_name(log.stem + ".expected.json")


def parse_whole(log: Path, log_format: str) -> dict[str, Any]:
    """Everything the parsers find in one file, in a JSON-comparable shape."""
    metrics: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    unparsed: list[int] = []
    if log_format in DOCUMENT_FORMATS:
        for number, metric in enumerate(parse_trainer_state(log.read_text()), 1):
            metrics.append(_metric_record(number, metric))
        return {
            "format": log_format,
            "metrics": metrics,
            "findings": findings,
            "unparsed": unparsed,
        }
    parser = make_parser(log_format, path=str(log))  # some formats name metrics by path
    with log.open("rb") as handle:
        for number, line in read_lines(handle):  # cut as `parse` and the tail cut it
            try:
                metric = parser.feed(line)
            except ValueError:
                unparsed.append(number)
                metric = None
            finding = scan_line(line)
            if finding is not None:
                findings.append(
                    {"line": number, "finding": finding.kind, "evidence": finding.evidence}
                )
            if metric is not None:
                metrics.append(_metric_record(number, metric))
                for found in findings_from_metric(metric):
                    findings.append(
                        {"line": number, "finding": found.kind, "evidence": found.evidence}
                    )
    return {"format": log_format, "metrics": metrics, "findings": findings, "unparsed": unparsed}


def _metric_record(number: int, metric: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "line": number,
        "values": [[name, json_number(value)] for name, value in metric.values],
    }
    if metric.step is not None:
        record["step"] = metric.step
    if metric.epoch is not None:
        record["epoch"] = metric.epoch
    if metric.taken_at is not None:
        record["taken_at"] = metric.taken_at
    return record


def _sample(log: Path) -> list[str]:
    with log.open("rb") as handle:
        return [line for _, (_, line) in zip(range(200), read_lines(handle), strict=False)]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_log_parses_to_golden(log: Path) -> None:
    expected_path = _expected_path(log)
    log_format = detect_format(_sample(log), str(log))
    result = parse_whole(log, log_format)
    if os.environ.get("GPUHERD_UPDATE_GOLDEN"):
        # Comparing with what was just written would always pass: write, and say so instead.
        expected_path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        pytest.skip(
            f"wrote {expected_path.name}: read the diff, and run again without "
            "GPUHERD_UPDATE_GOLDEN (test_parsers_hand_read.py checks values read by eye)"
        )
    expected = json.loads(expected_path.read_text())
    assert result == expected


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_forcing_the_detected_format_gives_the_same_result(log: Path) -> None:
    expected = json.loads(_expected_path(log).read_text())
    assert parse_whole(log, expected["format"]) == expected


@pytest.mark.parametrize("log_format", [n for n in FORMAT_NAMES if n not in DOCUMENT_FORMATS])
def test_every_format_survives_every_log(log_format: str) -> None:
    # A wrong --format must never crash: lines either parse, return None or count as unparsed.
    for log in LOGS:
        if log.name != "trainer_state.json":
            result = parse_whole(log, log_format)
            assert result["format"] == log_format


def test_every_golden_file_has_its_log() -> None:
    logs = {_expected_path(log) for log in LOGS}
    assert set(DATA.glob("*/*.expected.json")) == logs


def test_the_test_data_stays_small() -> None:
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 2_000_000

"""Property tests: no input makes a parser fail other than by ValueError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.findings import scan_line
from parsers.model import LogMetric
from parsers.registry import DOCUMENT_FORMATS, FORMAT_NAMES, detect_format, make_parser
from parsers.text import MAX_LINE_CHARS, normalise_line

LINE_FORMATS = [name for name in FORMAT_NAMES if name not in DOCUMENT_FORMATS]
# Text built from the pieces log lines are made of, so the regexes get near-misses, not noise.
PIECES = st.sampled_from(
    ["loss", "=", ": ", "step", "Epoch ", "1/3", "[", "]", "|", "%", "it/s", "s/it", "{'", "'",
     '{"', '"', "}", ",", "nan", "-inf", "1e-5", "1,234.5", "\r", "\x1b[32m", "\b", " ", "  ",
     "━", "•", "0:00:01", "iter ", "ms", "/step", " - ", "copypaste: ", "Task: ", "(train)",
     "Acc@1 ", "Train: ", "Test: ", "eta: ", "d2.utils.events]:", "\udcff", "\x00", "9", "."]
)
LINES = st.lists(PIECES, max_size=40).map("".join) | st.text(max_size=200)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(LINES, min_size=1, max_size=8))
@pytest.mark.parametrize("log_format", LINE_FORMATS)
def test_feed_returns_a_metric_none_or_raises_value_error(
    log_format: str, lines: list[str]
) -> None:
    parser = make_parser(log_format)
    for line in lines:
        try:
            result = parser.feed(line)
        except ValueError:
            continue
        assert result is None or isinstance(result, LogMetric)
        if result is not None:
            assert result.values and all(isinstance(v, float) for _, v in result.values)
    parser.reset()


@settings(max_examples=300, deadline=None)
@given(line=LINES)
def test_scan_line_and_detection_never_fail(line: str) -> None:
    scan_line(line)
    assert detect_format([line, line]) in FORMAT_NAMES


@given(line=st.text(max_size=300) | st.lists(PIECES, max_size=60).map("".join))
def test_normalised_lines_are_short_and_free_of_control_sequences(line: str) -> None:
    out = normalise_line(line * 40)
    assert len(out) <= MAX_LINE_CHARS
    assert "\x1b[" not in out and "\b" not in out and "\r" not in out

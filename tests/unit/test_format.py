from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuherd.present import format as f

GiB = 1 << 30
MiB = 1 << 20

FORMATTERS_OF_ONE = [
    f.fmt_bytes,
    f.fmt_bytes_gib,
    f.fmt_pct,
    f.fmt_temp,
    f.fmt_power,
    f.fmt_mhz,
    f.fmt_number,
    f.fmt_duration,
    f.fmt_rate,
    f.fmt_timestamp,
]


@pytest.mark.parametrize("formatter", FORMATTERS_OF_ONE)
@pytest.mark.parametrize("missing", [None, math.nan, math.inf])
def test_missing_and_non_finite_values_show_na(formatter, missing):
    assert formatter(missing) == "N/A"


def test_na_for_other_kinds():
    assert f.fmt_pstate(None) == f.fmt_on_off(None) == f.fmt_count(None) == "N/A"
    assert f.fmt_text(None) == f.fmt_text("") == "N/A"
    assert f.fmt_gib_pair(None, None) == f.fmt_power_pair(None, None) == "N/A"
    assert f.fmt_elapsed(None, 100.0) == "N/A"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1536, "1.5 KiB"),
        (615 * MiB, "615 MiB"),
        (12.34 * GiB, "12.3 GiB"),
        (139.8 * GiB, "140 GiB"),
        (3 * 1024 * GiB, "3.0 TiB"),
        (-2 * MiB, "-2.0 MiB"),
    ],
)
def test_fmt_bytes_picks_the_unit(n, text):
    assert f.fmt_bytes(n) == text


def test_gib_forms():
    assert f.fmt_bytes_gib(139.8 * GiB) == "139.8 GiB"
    assert f.fmt_bytes_gib(615 * MiB, digits=2) == "0.60 GiB"
    assert f.fmt_gib_pair(12.3 * GiB, 80 * GiB) == "12.3 / 80.0 GiB"
    assert f.fmt_gib_pair(None, 80 * GiB) == "N/A / 80.0 GiB"


def test_percentages():
    assert f.fmt_pct(97.4) == "97%"
    assert f.fmt_pct(12.345, digits=1) == "12.3%"
    assert f.pct_of(20 * GiB, 80 * GiB) == 25.0
    assert f.pct_of(1, 0) is None
    assert f.pct_of(None, 10) is None
    assert f.pct_of(1, None) is None


def test_device_units():
    assert f.fmt_temp(64.0) == "64°C"
    assert f.fmt_power(512.345) == "512 W"
    assert f.fmt_power_pair(512.3, 700.0) == "512 / 700 W"
    assert f.fmt_power_pair(None, 700.0) == "N/A / 700 W"
    assert f.fmt_mhz(1980) == "1980 MHz"
    assert f.fmt_pstate(0) == "P0"
    assert f.fmt_on_off(True) == "on" and f.fmt_on_off(False) == "off"
    assert f.fmt_count(1234567) == "1,234,567"
    assert f.fmt_number(1.256) == "1.26"
    assert f.fmt_rate(1.5 * MiB) == "1.5 MiB/s"
    assert f.fmt_text("python train.py") == "python train.py"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0:00"),
        (42.9, "0:42"),
        (3725, "1:02:05"),
        (86400 + 3660, "1d 01:01"),
        (-1, "N/A"),
    ],
)
def test_fmt_duration(seconds, text):
    assert f.fmt_duration(seconds) == text


def test_fmt_elapsed_and_timestamp():
    assert f.fmt_elapsed(1000.0, 1065.0) == "1:05"
    assert f.fmt_timestamp(0) == "1970-01-01 00:00:00"  # conftest pins TZ=UTC


@given(
    st.one_of(
        st.none(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(1 << 70), max_value=1 << 70),
    )
)
def test_no_formatter_raises_on_any_number(value):
    for formatter in FORMATTERS_OF_ONE:
        assert isinstance(formatter(value), str)


@given(st.integers(min_value=0, max_value=1 << 60))
def test_fmt_bytes_number_stays_below_1024_of_its_unit(n):
    number, unit = f.fmt_bytes(n).split(" ")
    assert unit in {"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
    assert float(number) <= 1024


def test_format_module_does_not_import_textual():
    code = "import sys, gpuherd.present.format; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""`--vram` sizes: what each spelling means, what is refused, and the shown form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuherd.present.format import format_size
from gpuherd.queue.sizes import MAX_BYTES, parse_size

GIB = 1 << 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20GiB", 20 * GIB),
        ("20G", 20 * GIB),
        ("20g", 20 * GIB),
        ("20 GiB", 20 * GIB),
        (" 20gib ", 20 * GIB),
        ("20GB", 20_000_000_000),
        ("512MiB", 512 << 20),
        ("512M", 512 << 20),
        ("1.5TiB", 3 << 39),
        (".5G", GIB // 2),
        ("20000000000", 20_000_000_000),
        ("20000000000B", 20_000_000_000),
        ("0", 0),
        ("1k", 1024),
        ("1KB", 1000),
        ("0.1B", 0),
        ("1.0000000001GiB", GIB),
    ],
)
def test_each_spelling_means_exact_bytes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "20XB",
        "",
        "GiB",
        "-1G",
        "1e9",
        "nan",
        "inf",
        "20iB",
        "20 G B",
        "0x10",
        "20GiBs",
        "2,5G",
        "١٢G",
    ],
)
def test_what_is_not_a_size_is_refused_with_the_examples(text: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_size(text)
    assert str(error.value) == (
        f"{text!r} is not a size: expected e.g. 20GiB, 512MiB, 1.5TiB, "
        "20G (= GiB) or a number of bytes"
    )


def test_a_size_beyond_any_gpu_is_refused() -> None:
    assert parse_size(f"{MAX_BYTES}") == MAX_BYTES
    with pytest.raises(ValueError, match=r"^'1025PiB' is too large \(at most 1024 PiB\)$"):
        parse_size("1025PiB")


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (20 * GIB, "20 GiB"),
        (int(12.1 * GIB), "12.1 GiB"),
        (GIB - 1, "1 GiB"),
        ((1 << 40) - (1 << 20), "1 TiB"),
        (1023 * GIB, "1023 GiB"),
        (MAX_BYTES, "1024 PiB"),
    ],
)
def test_sizes_show_in_the_largest_unit_with_one_decimal(n_bytes: int, text: str) -> None:
    assert format_size(n_bytes) == text


@given(st.integers(min_value=0, max_value=MAX_BYTES))
def test_a_shown_size_reads_back_within_its_rounding(n_bytes: int) -> None:
    shown = format_size(n_bytes)
    back = parse_size(shown)
    unit = 1  # the largest binary unit not above n_bytes: the one shown with one decimal
    while unit * 1024 <= n_bytes and unit < 1 << 50:
        unit *= 1024
    assert abs(back - n_bytes) <= (0 if unit == 1 else 0.05 * unit + 0.5)
    assert format_size(back) == shown  # reading a shown size and showing it again is stable


@given(st.integers(min_value=0, max_value=MAX_BYTES))
def test_a_number_of_bytes_reads_as_itself(n_bytes: int) -> None:
    assert parse_size(str(n_bytes)) == n_bytes
    assert parse_size(f"{n_bytes}B") == n_bytes


@given(
    st.integers(min_value=0, max_value=1 << 20),
    st.sampled_from(
        [
            ("K", 1 << 10),
            ("MiB", 1 << 20),
            ("g", 1 << 30),
            ("TiB", 1 << 40),
            ("GB", 10**9),
            ("kb", 10**3),
        ]
    ),
)
def test_a_whole_number_of_units_is_exact(count: int, unit: tuple[str, int]) -> None:
    suffix, factor = unit
    assert parse_size(f"{count}{suffix}") == count * factor

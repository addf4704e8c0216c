"""`visible`: what others wrote reaches a terminal with its control characters made visible."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuherd.present.format import fmt_text, visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("log\x1b[2J.txt", "log\\x1b[2J.txt"),  # ESC: clears the screen
        ("\x9b2J", "\\x9b2J"),  # C1 CSI: the same in one byte
        ("\x85next", "\\x85next"),  # C1 NEL
        ("a\x00b\x07c\x08d", "a\\x00b\\x07c\\x08d"),  # C0: NUL, bell, backspace
        ("line\nfake line\rover", "line\\x0afake line\\x0dover"),  # a fake second line
        ("tab\there", "tab\\x09here"),
        ("del\x7f", "del\\x7f"),
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # RIGHT-TO-LEFT OVERRIDE
        ("\u2066isolate\u2069 \u200fmark \u061c", "\\u2066isolate\\u2069 \\u200fmark \\u061c"),
        ("zero\u200bwidth \ufeffbom", "zero\\u200bwidth \\ufeffbom"),
        ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),  # line and paragraph separators
        ("tag\U000e0041", "tag\\U000e0041"),  # a tag character (format, astral)
        ("bad byte \udc9b", "bad byte \\udc9b"),  # os.fsdecode's surrogate for byte 0x9b
    ],
)
def test_each_kind_of_control_character_is_made_visible(text: str, shown: str) -> None:
    assert visible(text) == shown
    assert visible(text).isprintable()


@pytest.mark.parametrize(
    "text",
    [
        "python train.py --lr 3e-4",
        "café Zürich naïve",
        "数据集/训练.log",
        "עברית ‎",
        "Ελληνικά",
        "👩\u200d👩\u200d👧 family",
        "क्\u200dष",
        "non\u00a0breaking",
        "½ ² ∞ µs",
        "",
        " ",
    ],
)
def test_ordinary_unicode_is_kept(text: str) -> None:
    kept = text.replace("\u200e", "\\u200e")  # LEFT-TO-RIGHT MARK is a format character
    assert visible(text) == kept


@given(st.text())
def test_nothing_that_steers_a_terminal_survives(text: str) -> None:
    shown = visible(text)
    hidden = [
        c
        for c in shown
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") and c not in "\u200c\u200d"
    ]
    assert hidden == []
    if text.isprintable():
        assert shown == text
    shown.encode()  # no lone surrogate: printing it cannot raise UnicodeEncodeError


def test_fmt_text_shows_what_others_wrote_visibly() -> None:
    assert fmt_text("python \x1b]0;owned\x07train.py") == "python \\x1b]0;owned\\x07train.py"
    assert fmt_text(None) == fmt_text("") == "N/A"

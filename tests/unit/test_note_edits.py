"""The note's text edit, byte for byte: comments on a null block, CRLF files that gain lines,
and the check after the edit that refuses a splice which did not give the intended values."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from gpuherd.note.note import Note, NoteError
from gpuherd.note.note_file import write_note
from gpuherd.note.yaml_edit import YamlEditError, set_block

NOTE = Note(dt.date(2025, 10, 25), "Verified training run on NVIDIA H200 (141GB VRAM).")
LINES = (
    "  last_verified: 2025-10-25\n"
    '  last_verification_note: "Verified training run on NVIDIA H200 (141GB VRAM)."\n'
)


@pytest.mark.parametrize("null", ["~", "null", "Null", "NULL", ""])
def test_filling_a_null_block_keeps_its_comment(null: str) -> None:
    text = f"name: unet\nverification: {null}  # to be filled after the first run\ntags: [a]\n"
    # the null word and the spaces before it go; an empty value leaves the line as it was
    header = "verification:   #" if null == "" else "verification:  #"
    assert set_block(text, "verification", NOTE.values()) == (
        f"name: unet\n{header} to be filled after the first run\n" + LINES + "tags: [a]\n"
    )


def test_filling_a_null_block_without_a_comment() -> None:
    assert set_block("verification: ~\n", "verification", NOTE.values()) == (
        "verification:\n" + LINES
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a missing key inserted into an existing block
        (
            "name: x\r\nverification:\r\n  verified_by: alice\r\nz: 1\r\n",
            "name: x\r\nverification:\r\n  verified_by: alice\r\n" + LINES + "z: 1\r\n",
        ),
        # a new block appended
        ("name: x\r\nz: 1\r\n", "name: x\r\nz: 1\r\nverification:\r\n" + LINES),
        # a null block filled, its comment kept
        (
            "name: x\r\nverification: ~ # todo\r\nz: 1\r\n",
            "name: x\r\nverification: # todo\r\n" + LINES + "z: 1\r\n",
        ),
        # the last line of the file has no line break at all
        (
            "name: x\r\nverification:\r\n  verified_by: alice",
            "name: x\r\nverification:\r\n  verified_by: alice\r\n" + LINES.rstrip("\n"),
        ),
    ],
    ids=["insert", "new_block", "fill_null", "no_final_newline"],
)
def test_lines_added_to_a_crlf_file_end_in_crlf(text: str, expected: str) -> None:
    new = set_block(text, "verification", NOTE.values())
    assert new == expected.replace("\n", "\r\n").replace("\r\r\n", "\r\n")
    assert re.search(r"(?<!\r)\n", new) is None


def test_a_crlf_example_file_gets_crlf_lines(tmp_path: Path) -> None:
    path = tmp_path / "example.yaml"
    path.write_bytes(b"name: llama-lora\r\nverification:\r\n  verified_by: bob\r\n")
    assert write_note(path, NOTE) is True
    raw = path.read_bytes()
    assert raw == (
        b"name: llama-lora\r\nverification:\r\n  verified_by: bob\r\n"
        + LINES.replace("\n", "\r\n").encode()
    )


def test_a_splice_that_misses_its_key_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    # The key carries a tag: the text edit sets its value, but what YAML then reads is not the
    # key `last_verified` holding the date. Only the check after the edit can see that.
    text = "name: x\nverification:\n  !!str last_verified: 2020-01-01\n"
    with pytest.raises(
        YamlEditError,
        match="the edit would change more than the "
        "`verification:` keys; the file is left untouched",
    ):
        set_block(text, "verification", NOTE.values())
    path = tmp_path / "example.yaml"
    path.write_text(text)
    with pytest.raises(NoteError):
        write_note(path, NOTE)
    assert path.read_text() == text


@pytest.mark.parametrize("value", ["!!str ~", "!!str", "!!null ~", "!custom"])
def test_a_tagged_value_is_no_empty_block(value: str) -> None:
    with pytest.raises(
        YamlEditError,
        match=re.escape("`verification:` is a single value; expected a mapping (fix it by hand)"),
    ):
        set_block(f"verification: {value}\n", "verification", NOTE.values())

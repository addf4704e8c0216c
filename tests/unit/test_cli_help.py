"""Every command's `--help` says what goes after `--` and which `--format` names exist."""

from __future__ import annotations

import pytest

from gpuherd import cli
from gpuherd.commands import parse as parse_command
from parsers.registry import FORMAT_NAMES


def help_of(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        cli.parse_args([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [("record",), ("queue", "add")])
def test_commands_that_take_a_command_show_it_in_their_usage(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    usage = help_of(*argv, capsys=capsys).split("\n\n")[0]
    assert usage.startswith(f"usage: gpuherd {' '.join(argv)} ")
    assert usage.rstrip().endswith("[-- CMD ARGS...]")


@pytest.mark.parametrize("argv", [("parse",), ("snapshot",), ("queue", "ls"), ("summarize",)])
def test_commands_that_take_no_command_do_not_offer_one(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert "-- CMD" not in help_of(*argv, capsys=capsys).split("\n\n")[0]


def test_the_root_help_says_where_a_command_goes(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of(capsys=capsys).split())
    assert "gpuherd record DIR -- CMD ARGS..." in text
    assert "gpuherd queue add [flags] -- CMD ARGS..." in text


def test_parse_help_lists_exactly_the_registry_format_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_command.FORMAT_NAMES == FORMAT_NAMES
    text = help_of("parse", capsys=capsys)
    listed = text.split("--format names: ")[1].split(".\n")[0].replace("\n", " ")
    assert [name.strip() for name in listed.split(",")] == list(FORMAT_NAMES)

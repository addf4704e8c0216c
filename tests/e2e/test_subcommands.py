"""Subcommands, the old spellings rewritten to them, misplaced flags, help and exit codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.cli import COMMANDS, UsageError, rewrite_aliases
from gpuherd.common import exit_codes
from tests.usage_errors import error_line

REPO = Path(__file__).resolve().parents[2]
SESSIONS = REPO / "tests" / "data" / "sessions"
TRAIN_LOG = REPO / "tests" / "data" / "logs" / "generic" / "train.log"


def gpuherd(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["monitor"]),
        (["--log", "x.log", "--interval", "2"], ["monitor", "--log", "x.log", "--interval", "2"]),
        (["--record", "D"], ["record", "D"]),
        (["--record=D", "--duration", "5m"], ["record", "D", "--duration", "5m"]),
        (
            ["--record", "D", "--log", "a", "--", "python", "--record", "x"],
            ["record", "D", "--log", "a", "--", "python", "--record", "x"],
        ),
        (["--tui", "--record", "D", "--", "true"], ["record", "D", "--tui", "--", "true"]),
        (["--replay", "S", "--speed", "4"], ["replay", "S", "--speed", "4"]),
        (["--speed", "4", "--replay=S"], ["replay", "S", "--speed", "4"]),
        (["--demo"], ["demo"]),
        (["--demo", "--speed", "2"], ["demo", "--speed", "2"]),
        (["--record", "D", "--tui", "snapshot"], ["record", "D", "--tui", "snapshot"]),
        (["--record"], ["record"]),  # the record parser says DIR is missing
        (["--record", "--log", "a"], ["record", "--log", "a"]),  # likewise
        (["--", "ls"], ["monitor", "--", "ls"]),
        # A subcommand, the root's own flags, or a misspelt command: left as they are.
        (["snapshot", "--record", "X"], ["snapshot", "--record", "X"]),
        (["record", "D", "--", "true"], ["record", "D", "--", "true"]),
        (["--help"], ["--help"]),
        (["--version"], ["--version"]),
        (["snapshots"], ["snapshots"]),
    ],
)
def test_old_spellings_are_rewritten_to_subcommands(argv: list[str], expected: list[str]) -> None:
    assert rewrite_aliases(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--record", "D", "--replay", "S"],
            "--record records this machine; it cannot be combined with --replay or --demo",
        ),
        (
            ["--demo", "--record", "D"],
            "--record records this machine; it cannot be combined with --replay or --demo",
        ),
        (["--replay", "S", "--demo"], "give one of --replay and --demo"),
        (["--record", "A", "--record", "B"], "--record is given twice"),
    ],
)
def test_two_modes_at_once_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        rewrite_aliases(argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # Each of these was silently ignored before: the flag belongs to another mode.
        (["--tui"], "gpuherd monitor: error: unrecognized arguments: --tui"),
        (["--duration", "5m"], "gpuherd monitor: error: unrecognized arguments: --duration 5m"),
        (
            ["--peak-interval", "0.1"],
            "gpuherd monitor: error: unrecognized arguments: --peak-interval 0.1",
        ),
        (
            ["snapshot", "--record", "X"],
            "gpuherd snapshot: error: unrecognized arguments: --record X",
        ),
        (
            ["--record", "X", "--tui", "snapshot"],
            "gpuherd record: error: unrecognized arguments: snapshot",
        ),
        (
            ["--replay", str(SESSIONS / "tasks"), "--log", "x.log"],
            "gpuherd replay: error: unrecognized arguments: --log x.log",
        ),
        (["demo", "--interval", "2"], "gpuherd demo: error: unrecognized arguments: --interval 2"),
        (["--", "ls"], "gpuherd monitor: error: a command after `--` needs --record DIR"),
        (
            ["snapshot", "--", "ls"],
            "gpuherd snapshot: error: a command after `--` needs --record DIR",
        ),
        (
            ["parse", str(TRAIN_LOG), "--", "ls"],
            "gpuherd parse: error: a command after `--` needs --record DIR",
        ),
        (["record"], "gpuherd record: error: the following arguments are required: DIR"),
        (
            ["snapshots"],
            "gpuherd: error: argument COMMAND: invalid choice: 'snapshots' (choose from "
            "'monitor', 'replay', 'demo', 'record', 'snapshot', 'parse', 'summarize', 'note', "
            "'queue', 'serve-metrics', 'fleet')",
        ),
        (
            ["--record", "D", "--replay", "S"],
            "gpuherd: error: --record records this machine; it "
            "cannot be combined with --replay or --demo",
        ),
    ],
)
def test_misplaced_flags_are_usage_errors(tmp_path: Path, argv: list[str], message: str) -> None:
    out = gpuherd(*argv, cwd=tmp_path)
    assert out.returncode == exit_codes.USAGE == 2
    assert error_line(out.stderr) == message
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == [], "nothing was recorded"


METRICS = ["--serve-metrics", "--metrics-cert", "--metrics-key"]
FLAGS = {
    "monitor": ["--interval", "--log", "--watch", *METRICS],
    "replay": ["DIR", "--speed", *METRICS],
    "demo": ["--speed"],
    "record": [
        "DIR",
        "--duration",
        "--tui",
        "--log",
        "--watch",
        "--interval",
        "--peak-interval",
        "-- CMD ARGS...",
        *METRICS,
    ],
    "snapshot": ["--json"],
    "parse": ["FILE", "--format", "--json"],
    "summarize": ["DIR", "--json", "--md"],
    "note": ["DIR", "--example", "--dry-run"],
    "queue": ["add", "ls", "show", "rm", "cancel", "pause", "resume", "move", "run"],
    "serve-metrics": [
        "[HOST:]PORT",
        "--replay",
        "--speed",
        "--interval",
        "--log",
        "--watch",
        "--metrics-cert",
        "--metrics-key",
    ],
    "fleet": ["--prometheus", "--interval", "--stale-after", "--forget-after"],
}


def test_every_command_has_its_flags_listed() -> None:
    assert sorted(FLAGS) == sorted(COMMANDS)


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_each_command_has_its_own_help(command: str) -> None:
    out = gpuherd(command, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: gpuherd {command} ")
    for flag in FLAGS[command]:
        assert flag in out.stdout, flag
    others = {f for fs in FLAGS.values() for f in fs if f.startswith("--")} - set(FLAGS[command])
    options = out.stdout.split("options:")[1].split("\n\n")[0]
    assert [f for f in others if re.search(rf"\s{f}\b", options)] == []


def test_root_help_lists_the_commands_and_the_old_spellings() -> None:
    out = gpuherd("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert re.search(rf"^    {name}\s", out.stdout, re.MULTILINE), name
    assert "`gpuherd --record DIR ...` is `gpuherd record DIR ...`" in " ".join(out.stdout.split())


def test_snapshot_runs_and_exits_by_the_table() -> None:
    out = gpuherd("snapshot", "--json")
    data = json.loads(out.stdout)
    if data["gpu_error"] is not None and data["driver_version"] is None:
        assert out.returncode == exit_codes.NO_SOURCE == 3
    else:
        assert out.returncode in (exit_codes.OK, exit_codes.FAILED)
    assert data["host"]["mem_total_bytes"] > 0


def test_parse_runs() -> None:
    out = gpuherd("parse", str(TRAIN_LOG), "--json")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert records and all(r["file"] == str(TRAIN_LOG) for r in records)


def test_parse_with_an_unknown_format_is_a_usage_error() -> None:
    out = gpuherd("parse", str(TRAIN_LOG), "--format", "nope")
    assert out.returncode == exit_codes.USAGE
    assert out.stderr.startswith("gpuherd parse: unknown format 'nope'; known: ")


def test_summarize_runs_on_a_session(tmp_path: Path) -> None:
    session = Path(shutil.copytree(SESSIONS / "tasks", tmp_path / "s"))
    out = gpuherd("summarize", str(session), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["session"]["host"] == "tasks-box" and summary["session"]["duration_s"] == 39.0
    assert json.loads((session / "summary.json").read_text()) == summary


def test_record_runs_a_tiny_command_and_passes_its_exit_code(tmp_path: Path) -> None:
    session = tmp_path / "s"
    out = gpuherd(
        "record",
        str(session),
        "--interval",
        "0.05",
        "--",
        sys.executable,
        "-c",
        "print('hello'); raise SystemExit(5)",
    )
    assert out.returncode == 5, out.stderr
    assert "hello" in out.stdout
    assert (session / "command.log").read_text() == "hello\n"
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit_code"] == 5 and meta["ended_at"] is not None


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", str(SESSIONS / "tasks")],
        ["demo"],
        ["monitor"],
        ["--replay", str(SESSIONS / "tasks")],
        ["--demo"],
        [],
    ],
)
def test_dashboard_commands_refuse_without_a_terminal(argv: list[str]) -> None:
    out = gpuherd(*argv)
    assert out.returncode == exit_codes.USAGE
    assert "the dashboard needs a terminal" in out.stderr
    assert "\x1b[" not in out.stderr + out.stdout


@pytest.mark.parametrize("argv", [["record", "--tui"], ["--tui", "--record"]])
def test_record_tui_refuses_without_a_terminal(tmp_path: Path, argv: list[str]) -> None:
    session = tmp_path / "s"
    out = gpuherd(*argv, str(session), "--", "true")
    assert out.returncode == exit_codes.USAGE
    assert "needs a terminal; drop --tui to record headless" in out.stderr
    assert not session.exists()


def readme_exit_table() -> dict[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(\d+)` \| `(\w+)` \|", section, re.MULTILINE)
    }


def test_readme_exit_code_table_is_the_module() -> None:
    table = {name: value for name, value in vars(exit_codes).items() if name.isupper()}
    assert readme_exit_table() == {str(v): k for k, v in table.items()}

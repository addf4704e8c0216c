"""The command line in a subprocess: headless paths skip Textual, bad input exits cleanly."""

from __future__ import annotations

import importlib.resources
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.cli import COMMANDS
from tests.usage_errors import error_line

REPO = Path(__file__).resolve().parents[2]
E2E_SESSION = REPO / "tests" / "data" / "sessions" / "e2e"


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def gpuherd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_modules_do_not_import_textual(command: str) -> None:
    # Every command module is imported to build the parser; the work is imported in run().
    module = COMMANDS[command].__name__
    out = python(
        f"import importlib, sys; importlib.import_module({module!r}); "
        "print('textual' in sys.modules, 'tui' in sys.modules)"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_monitor_module_loads_textual_only_when_the_dashboard_starts() -> None:
    out = python("import sys, gpuherd.dashboard.monitor; print('textual' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("argv", [["snapshot", "--help"], ["parse", "--help"], ["--help"]])
def test_help_paths_do_not_import_textual(argv: list[str]) -> None:
    code = (
        "import sys\nfrom gpuherd.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print('TEXTUAL', 'textual' in sys.modules)"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert "TEXTUAL False" in out.stdout


def test_parse_command_does_not_import_textual(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.5\n", encoding="utf-8")
    code = (
        "import sys\nfrom gpuherd.cli import main\n"
        f"main(['parse', {str(log)!r}])\n"
        "print('TEXTUAL', 'textual' in sys.modules)"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr  # a missing module fails here, never skips
    assert "TEXTUAL False" in out.stdout, out.stderr


def copy_session(tmp_path: Path) -> Path:
    target = tmp_path / "session"
    shutil.copytree(E2E_SESSION, target)
    return target


def test_replay_of_a_missing_directory_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    out = gpuherd("--replay", str(missing))
    assert out.returncode == 2
    assert str(missing) in out.stderr and "no such directory" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_replay_with_garbled_meta_exits_2_naming_the_file(tmp_path: Path) -> None:
    session = copy_session(tmp_path)
    (session / "meta.json").write_text('{"schema": 1, "host": ', encoding="utf-8")
    out = gpuherd("--replay", str(session))
    assert out.returncode == 2
    assert "meta.json" in out.stderr and "not valid JSON" in out.stderr
    assert "Traceback" not in out.stderr


def test_replay_of_a_gpu_csv_without_its_gpu_column_exits_2_naming_file_and_line(
    tmp_path: Path,
) -> None:
    # A bad cell or row is read as N/A or skipped and counted; a file whose rows cannot be
    # placed at all is refused before the dashboard starts.
    session = copy_session(tmp_path)
    text = (session / "gpu.csv").read_text(encoding="utf-8")
    (session / "gpu.csv").write_text(text.replace("t,gpu,", "t,index,", 1), encoding="utf-8")
    out = gpuherd("--replay", str(session))
    assert out.returncode == 2
    assert f"{session}/gpu.csv:1: missing required column(s): gpu" in out.stderr
    assert "Traceback" not in out.stderr


def test_demo_without_a_bundled_session_says_so() -> None:
    # The demo session is bundled (tests/e2e/test_tmux_demo.py plays it); a build without it
    # is made here by pointing the lookup at a folder that does not exist.
    code = (
        "import sys\nimport gpuherd.dashboard.monitor as m\nfrom gpuherd.cli import main\n"
        "m.DEMO_DIR = 'data/no-such-demo'\nsys.exit(main(['--demo']))\n"
    )
    out = python(code)
    assert out.returncode == 2
    assert "no demo session is bundled" in out.stderr and "gpuherd replay DIR" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_demo_session_is_package_data() -> None:
    demo = importlib.resources.files("gpuherd").joinpath("data/demo")
    for name in (
        "meta.json",
        "gpu.csv",
        "host.csv",
        "processes.csv",
        "metrics.csv",
        "events.jsonl",
    ):
        assert demo.joinpath(name).is_file(), name


def test_e2e_fixture_session_is_well_formed() -> None:
    meta = json.loads((E2E_SESSION / "meta.json").read_text(encoding="utf-8"))
    assert meta["schema"] == 1 and meta["host"] == "e2e-box"
    header = (E2E_SESSION / "gpu.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("t,gpu,uuid,name,mem_used_bytes,mem_total_bytes")


def test_dashboard_without_a_terminal_says_what_to_use_instead() -> None:
    out = gpuherd("--replay", str(E2E_SESSION))
    assert out.returncode == 2
    assert "needs a terminal" in out.stderr and "gpuherd snapshot --json" in out.stderr
    assert "\x1b[" not in out.stderr, "no escape codes sprayed into the pipe"


EXPECTED_TIME = "expected a time such as 90s, 10m, 2h, 1h30m"
NOT_WITH_REPLAY = (
    "gpuherd: error: --record records this machine; it cannot be combined with --replay or --demo"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Each of these once recorded until killed, or busy-looped on a core.
        (["--duration", ""], f"--duration '': {EXPECTED_TIME}"),
        (
            ["--"],
            "gpuherd record: error: nothing after `--`: give the command to record "
            "(--record DIR -- CMD ARGS...)",
        ),
        (["--replay", str(E2E_SESSION)], NOT_WITH_REPLAY),
        (["--demo"], NOT_WITH_REPLAY),
        (
            ["--duration", "2s", "--interval", "1e-9"],
            "--interval must be at least 0.05 s (got 1e-09)",
        ),
        (
            ["--duration", "2s", "--interval", "0.049"],
            "--interval must be at least 0.05 s (got 0.049)",
        ),
        (
            ["--duration", "2s", "--peak-interval", "1e-12"],
            "--peak-interval must be 0 (off) or at least 0.005 s (got 1e-12)",
        ),
        (
            ["--duration", "2s", "--peak-interval", "0.0049"],
            "--peak-interval must be 0 (off) or at least 0.005 s (got 0.0049)",
        ),
        # Non-finite numbers: a session gpuherd cannot read, or the fast sampler silently off.
        (
            ["--duration", "2s", "--interval", "nan"],
            "argument --interval: not a finite number: 'nan'",
        ),
        (
            ["--duration", "2s", "--interval", "inf"],
            "argument --interval: not a finite number: 'inf'",
        ),
        (
            ["--duration", "2s", "--peak-interval", "nan"],
            "argument --peak-interval: not a finite number: 'nan'",
        ),
        (["--duration", "2s", "--speed", "nan"], "unrecognized arguments: --speed nan"),
        (["--duration", "nan"], f"--duration 'nan': {EXPECTED_TIME}"),
        (["--duration", "1e999s"], f"--duration '1e999s': {EXPECTED_TIME}"),
        (["--duration", "9" * 400 + "s"], f"--duration '{'9' * 400}s': too long"),
    ],
)
def test_record_refuses_bad_arguments_before_it_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    session = tmp_path / "s"
    out = gpuherd("--record", str(session), *args)
    assert out.returncode == 2, out.stderr
    if not message.startswith("gpuherd"):  # the record command names itself
        message = f"gpuherd record: error: {message}"
    assert error_line(out.stderr) == message
    assert "Traceback" not in out.stderr and not session.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--replay", str(E2E_SESSION), "--speed", "nan"],
            "gpuherd replay: error: argument --speed: not a finite number: 'nan'",
        ),
        (
            ["--replay", str(E2E_SESSION), "--speed=-inf"],
            "gpuherd replay: error: argument --speed: not a finite number: '-inf'",
        ),
        (
            ["--interval", "inf"],
            "gpuherd monitor: error: argument --interval: not a finite number: 'inf'",
        ),
        (
            ["--interval", "0.01"],
            "gpuherd monitor: error: --interval must be at least 0.05 s (got 0.01)",
        ),
        (["--"], "gpuherd monitor: error: a command after `--` needs --record DIR"),
    ],
)
def test_the_dashboard_refuses_bad_numbers_before_it_starts(args: list[str], message: str) -> None:
    out = gpuherd(*args)
    assert out.returncode == 2
    assert error_line(out.stderr) == message


@pytest.mark.parametrize(
    ("args"), [["--interval", "0.05"], ["--peak-interval", "0"], ["--peak-interval", "0.005"]]
)
def test_the_smallest_intervals_are_accepted(tmp_path: Path, args: list[str]) -> None:
    out = gpuherd("--record", str(tmp_path / "s"), "--duration", "0.5s", *args)
    assert out.returncode == 0, out.stderr

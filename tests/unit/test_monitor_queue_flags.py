"""`gpuherd --queue` and its runner flags: checked up front, refused outside their mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.cli import parse_args
from tests.queue_helpers import ROOT, GiB, Gpu, fake_runner, ledger_dir, write_script
from tests.recorded import wait_until
from tests.usage_errors import error_line


def test_queue_flags_take_the_runners_defaults_and_values() -> None:
    args = parse_args(["--queue"])
    assert (args.queue, args.settle, args.margin_bytes, args.grace) == (True, 10.0, GiB, 120.0)
    args = parse_args(
        ["monitor", "--queue", "--settle", "0", "--margin", "512MiB", "--grace", "30"]
    )
    assert (args.settle, args.margin_bytes, args.grace) == (0.0, 512 << 20, 30.0)
    assert parse_args([]).queue is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--settle", "5"], "--settle needs --queue"),
        (["--margin", "2GiB"], "--margin needs --queue"),
        (["monitor", "--grace", "5"], "--grace needs --queue"),
        (["--queue", "--settle", "-1"], "--settle must be 0 or more seconds"),
        (["--queue", "--margin", "20XB"], "--margin: "),
    ],
)
def test_bad_queue_flags_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2
    err = error_line(capsys.readouterr().err)
    assert err.startswith("gpuherd monitor: error: ") and message in err


def test_the_dashboard_refuses_to_run_the_queue_while_queue_run_holds_it(tmp_path: Path) -> None:
    script, state, ledger = tmp_path / "gpus.json", tmp_path / "state", ledger_dir(tmp_path)
    write_script(script, [Gpu("GPU-a")])
    runner = fake_runner(script, state, ledger, "--interval", "0.1")
    try:
        wait_until(
            lambda: (
                (state / "runner.lock").exists()
                and (state / "runner.lock").read_text().strip() == str(runner.pid)
            )
        )
        env = {**os.environ, "GPUHERD_STATE_DIR": str(state), "GPUHERD_LEDGER_DIR": str(ledger)}
        dashboard = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "monitor_fake.py"), str(script), "--queue"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert dashboard.returncode == 2
        assert dashboard.stderr == (
            f"gpuherd: queue: another `gpuherd queue run` (pid {runner.pid}) already runs the "
            f"queue in {state}; stop it first (one runner per user)\n"
        )
        assert runner.poll() is None
    finally:
        runner.terminate()
        runner.communicate(timeout=30)


@pytest.mark.parametrize("command", [["record", "DIR"], ["monitor"], ["serve-metrics", "9400"]])
def test_a_watch_directory_not_there_is_said_and_a_file_refused(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    command = [str(tmp_path / "s") if part == "DIR" else part for part in command]
    missing, there, a_file = tmp_path / "runz", tmp_path / "runs", tmp_path / "train.log"
    there.mkdir()
    a_file.write_text("step=1 loss=2\n")
    args = parse_args([*command, "--watch", str(there), "--watch", str(missing)])
    assert args.watch == [str(there), str(missing)]  # a run may make it later: not refused
    assert capsys.readouterr().err == (
        f"gpuherd {command[0]}: --watch {missing}: no such directory yet; logs are found in it "
        "once it appears\n"
    )
    with pytest.raises(SystemExit) as stop:
        parse_args([*command, "--watch", str(a_file)])
    assert stop.value.code == 2
    assert error_line(capsys.readouterr().err) == (
        f"gpuherd {command[0]}: error: --watch {a_file}: a file, not a directory (follow a file "
        f"with --log {a_file})"
    )

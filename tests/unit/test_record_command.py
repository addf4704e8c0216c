"""`gpuherd --record` as a user runs it: a real process, real signals, real files."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuherd.record.command import parse_duration
from tests.privileges import as_other_user, shared_directory, tmpfs

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]


def gpuherd(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "gpuherd", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "gpuherd", *args], capture_output=True, text=True, timeout=timeout
    )


def events(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines()]


def meta(root: Path) -> dict:
    return json.loads((root / "meta.json").read_text())


def wait_for(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_records_a_command_and_ends_with_its_exit_code(tmp_path: Path) -> None:
    root = tmp_path / "s"
    script = "import sys; print('loss=2.5'); print('oops', file=sys.stderr); sys.exit(3)"
    out = run("--record", str(root), "--", PY, "-c", script)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "loss=2.5\n"  # the command's own output, untouched
    assert "oops" in out.stderr and "Traceback" not in out.stderr
    assert sorted((root / "command.log").read_text().splitlines()) == ["loss=2.5", "oops"]
    kinds = [e["kind"] for e in events(root)]
    assert "start" in kinds and events(root)[-1]["kind"] != "start"
    assert [e["exit_code"] for e in events(root) if e["kind"] == "exit"] == [3]
    m = meta(root)
    assert m["exit_code"] == 3 and m["ended_at"] is not None
    assert m["command"] == [PY, "-c", script]
    assert json.loads((root / "summary.json").read_text())["session"]["exit_code"] == 3
    assert (root / "summary.md").exists()
    assert not (root / ".lock").exists()
    assert "exit code 3" in out.stderr  # the short summary


def test_a_missing_command_is_127_and_the_session_is_closed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    out = run("--record", str(root), "--", "no-such-command-gpuherd")
    assert out.returncode == 127
    assert "gpuherd: command not found: no-such-command-gpuherd" in out.stderr
    assert meta(root)["exit_code"] == 127 and meta(root)["ended_at"] is not None
    assert [e["exit_code"] for e in events(root) if e["kind"] == "exit"] == [127]
    assert not (root / ".lock").exists()


def test_without_a_command_records_for_the_duration(tmp_path: Path) -> None:
    root = tmp_path / "s"
    began = time.monotonic()
    out = run("--record", str(root), "--duration", "1.5s", "--interval", "0.2")
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - began >= 1.5
    assert len((root / "host.csv").read_text().splitlines()) >= 5
    assert meta(root)["ended_at"] is not None
    assert (root / "summary.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_a_recording_without_a_command(tmp_path: Path, sig: int) -> None:
    root = tmp_path / "s"
    proc = gpuherd("--record", str(root))
    wait_for(lambda: (root / "meta.json").exists())
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert meta(root)["ended_at"] is not None
    [stop] = [e for e in events(root) if e["kind"] == "signal"]
    assert stop["signal"] == signal.Signals(sig).name and stop["forwarded"] is None


def test_sigterm_is_forwarded_and_the_command_decides_the_exit(tmp_path: Path) -> None:
    root = tmp_path / "s"
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('saving checkpoint', flush=True),"
        " sys.exit(0)))\n"
        "print('training', flush=True)\ntime.sleep(60)\n"
    )
    proc = gpuherd("--record", str(root), "--", PY, "-c", script)
    wait_for(
        lambda: (root / "command.log").exists() and "training" in (root / "command.log").read_text()
    )
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "training\nsaving checkpoint\n"
    [sig] = [e for e in events(root) if e["kind"] == "signal"]
    assert sig == {**sig, "signal": "SIGTERM", "forwarded": "SIGTERM"}


def test_duration_stops_a_command_that_runs_too_long(tmp_path: Path) -> None:
    root = tmp_path / "s"
    out = run("--record", str(root), "--duration", "1s", "--", "sleep", "60")
    # the person's own limit: said as such, and no failure of gpuherd's or of the command's
    assert out.returncode == 0, out.stderr
    assert (
        f"recording into {root} until the command ends or 1s (--duration) has passed" in out.stderr
    )
    assert "--duration reached" in out.stderr
    assert (
        f"stopped the command at the --duration limit (it exited with code {128 + signal.SIGTERM})"
    ) in out.stderr
    assert f", stopped at the --duration limit (exit code {128 + signal.SIGTERM})" in out.stderr
    assert json.loads((root / "meta.json").read_text())["exit_code"] == 128 + signal.SIGTERM
    # gpuherd sent that SIGTERM; it received no signal, so none is logged as received
    kinds = [e["kind"] for e in events(root)]
    assert "signal" not in kinds
    assert [e["sent"] for e in events(root) if e["kind"] == "duration_reached"] == ["SIGTERM"]


def test_a_second_recorder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    first = gpuherd("--record", str(root))
    try:
        wait_for(lambda: (root / ".lock").exists() and (root / "meta.json").exists())
        second = run("--record", str(root), "--duration", "1s")
        assert second.returncode == 1
        assert f"is being recorded by pid {first.pid}" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    assert first.returncode == 0


def test_a_directory_that_already_holds_a_session_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    assert run("--record", str(root), "--", "true").returncode == 0
    again = run("--record", str(root), "--", "true")
    assert again.returncode == 1 and "already holds a recorded session" in again.stderr


def test_an_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = run("--record", str(tmp_path / "file" / "s"), "--", "true")
    assert out.returncode == 1
    assert "a parent of it is a file" in out.stderr and "Traceback" not in out.stderr


def test_a_read_only_directory_is_a_clear_error() -> None:
    # Root writes anywhere, so as root (CI) the recorder runs as an unprivileged user.
    with shared_directory() as parent:
        locked = parent / "ro"
        locked.mkdir(mode=0o555)
        argv = as_other_user([PY, "-m", "gpuherd", "--record", str(locked / "s"), "--", "true"])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 1, out.stderr
        assert f"{locked / 's'}" in out.stderr and "Permission denied" in out.stderr
        assert "Traceback" not in out.stderr
        assert list(locked.iterdir()) == []


def test_a_bad_duration_is_a_usage_error(tmp_path: Path) -> None:
    out = run("--record", str(tmp_path / "s"), "--duration", "ten minutes")
    assert out.returncode == 2 and "expected a time such as 90s" in out.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("10m", 600),
        ("1.5h", 5400),
        ("1h30m", 5400),
        ("2d", 172800),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", " ", "0s", "1x", "m10", "10 m", "-5s", "nan", "inf", "1e999s", "9" * 400, "9" * 400 + "s"],
)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_recording_stops_cleanly_when_files_cannot_grow(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes writes past 8 KiB fail (EFBIG), as a full disk would (ENOSPC).
    root = tmp_path / "s"
    limit = 8 * 1024
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from gpuherd.cli import main\n"
        f"sys.exit(main(['--record', {str(root)!r}, '--interval', '0.05', "
        "'--duration', '30s']))\n"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "recording stopped: cannot write" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (root / ".lock").exists()
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
    # What was written stays readable: the summary of the kept part works.
    summary = run("summarize", str(root), "--json")
    assert summary.returncode == 0, summary.stderr


def test_a_really_full_disk_stops_recording_and_keeps_the_data(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    disk = tmpfs(request, tmp_path / "disk", "size=96k")
    root = disk / "s"
    script = "import time\nfor i in range(10**6):\n    print('x' * 200, flush=True)\n"
    out = subprocess.run(
        [PY, "-m", "gpuherd", "--record", str(root), "--interval", "0.05", "--", PY, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "the disk is full" in out.stderr, out.stderr[-2000:]
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert not (root / ".lock").exists()
    assert (root / "gpu.csv").read_text().startswith("t,gpu,uuid")


def test_record_never_imports_textual(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom gpuherd.cli import main\n"
        f"rc = main(['--record', {str(tmp_path / 's')!r}, '--', 'true'])\n"
        "print('textual' in sys.modules, rc)\n"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "False 0"


def test_a_log_glob_follows_a_file_created_after_the_start(tmp_path: Path) -> None:
    # Lightning creates version_N/metrics.csv once the run is under way.
    root = tmp_path / "s"
    pattern = str(tmp_path / "logs" / "version_*" / "metrics.csv")
    script = (
        f"sleep 0.5; mkdir -p {tmp_path}/logs/version_0; "
        f"printf 'epoch,step,train_loss\\n0,10,0.5\\n0,20,0.4\\n' "
        f"> {tmp_path}/logs/version_0/metrics.csv; sleep 2.5"
    )
    out = run("--record", str(root), "--log", pattern, "--", "bash", "-c", script)
    assert out.returncode == 0, out.stderr
    with open(root / "metrics.csv", newline="") as f:
        metrics = list(csv.DictReader(f))
    task = str(tmp_path / "logs" / "version_0" / "metrics.csv")
    assert [(r["task"], r["metric"], r["value"], r["step"]) for r in metrics] == [
        (task, "train/loss", "0.5", "10"),
        (task, "train/loss", "0.4", "20"),
    ]
    [found] = [e for e in events(root) if e["kind"] == "log_found"]
    [exited] = [e for e in events(root) if e["kind"] == "exit"]
    assert found["task"] == task and found["t"] < exited["t"]  # a scan while it ran


def test_command_output_with_banners_first_is_parsed_by_its_progress_format(tmp_path: Path) -> None:
    # The real console of a Lightning run on an H200: banners at the start, the Rich bar's
    # last frame at the end. The banners alone once fixed the format as generic, which read
    # `using`, `params`, `mode`, `max_epochs` ... as metrics.
    console = Path(__file__).resolve().parents[1] / "data/logs/lightning_rich/h200_file.log"
    lines = console.read_text().splitlines(keepends=True)
    script = (
        "import sys, time; lines = open(sys.argv[1]).readlines(); "
        "sys.stdout.writelines(lines[:21]); sys.stdout.flush(); time.sleep(1.5); "
        "sys.stdout.writelines(lines[21:])"
    )
    root = tmp_path / "s"
    out = run("--record", str(root), "--", PY, "-c", script, str(console))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "".join(lines)
    with open(root / "metrics.csv", newline="") as f:
        metrics = {r["metric"]: float(r["value"]) for r in csv.DictReader(f)}
    assert metrics == {
        "throughput/it_s": 30.44,
        "eta_s": 0.0,
        "train/loss": 0.066,
        "train/acc": 1.0,
        "val/loss": 3.971,
        "val/acc": 0.309,
    }
    [task] = meta(root)["tasks"]
    assert (task["task"], task["format"], task["unparsed_lines"]) == (
        "command",
        "lightning_rich",
        0,
    )


def test_kill_9_of_gpuherd_leaves_the_command_running_and_logged(tmp_path: Path) -> None:
    # The command's stdout and stderr were pipes only gpuherd read: kill -9 (or the OOM
    # killer) of the recorder killed the training within 0.1 s (BrokenPipeError).
    root = tmp_path / "s"
    script = (
        "import os, sys, time\n"
        "print('pid', os.getpid(), flush=True)\n"
        "for i in range(80):\n"
        "    print(f'step={i} loss={1 / (i + 1):.4f}', flush=True)\n"
        "    time.sleep(0.05)\n"
        "sys.exit(3)\n"
    )
    log = root / "command.log"
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen(
            [PY, "-m", "gpuherd", "--record", str(root), "--", PY, "-c", script],
            stdout=out,
            stderr=err,
        )
    try:
        wait_for(lambda: log.exists() and "step=10 " in log.read_text())
    finally:
        proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    pid = int(log.read_text().split()[1])
    os.kill(pid, 0)  # raises ProcessLookupError if the command died with gpuherd
    wait_for(lambda: (root / "command.exit.json").exists(), timeout=60)
    record = json.loads((root / "command.exit.json").read_text())
    assert (record["exit_code"], record["pid"], record["log_dropped_bytes"]) == (3, pid, 0)
    expected = [f"pid {pid}", *(f"step={i} loss={1 / (i + 1):.4f}" for i in range(80))]
    wait_for(lambda: log.read_text().splitlines() == expected)  # the last lines come soon
    assert (tmp_path / "out").read_text().splitlines() == expected  # echoed all along
    # The session was never closed, yet its summary knows how the command ended.
    out = run("summarize", str(root), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["session"]["exit_code"] == 3
    assert any("command.exit.json" in w for w in summary["warnings"])


BACKGROUND = """
import os, sys, time
go, mark = sys.argv[1], sys.argv[2]
i = 0
try:
    while not os.path.exists(go):
        print(f'bg {i}', flush=True)
        i += 1
        time.sleep(0.05)
    for j in range(5):
        print(f'after {j}', flush=True)
except BrokenPipeError:
    open(mark, 'w').write(f'broken pipe after {i} lines')
    sys.exit(1)
open(mark, 'w').write(f'ok {i}')
"""


def test_a_process_left_behind_keeps_its_output_after_gpuherd_exits(tmp_path: Path) -> None:
    # It used to get SIGPIPE (here: BrokenPipeError) once gpuherd exited and closed the pipes.
    root, go, mark = tmp_path / "s", tmp_path / "go", tmp_path / "mark"
    script = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {BACKGROUND!r}, {str(go)!r}, "
        f"{str(mark)!r}])\n"
        "print('main done', flush=True)\n"
    )
    try:
        with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
            done = subprocess.run(
                [PY, "-m", "gpuherd", "--record", str(root), "--", PY, "-c", script],
                stdout=out,
                stderr=err,
                timeout=120,
            )
        assert done.returncode == 0, (tmp_path / "err").read_text()
        assert meta(root)["exit_code"] == 0 and not mark.exists()
        time.sleep(0.3)  # the process left behind prints on after gpuherd has gone
    finally:
        go.touch()
    wait_for(lambda: mark.exists(), timeout=60)
    text = mark.read_text()
    assert text.startswith("ok "), text
    count = int(text.split()[1])
    expected = ["main done", *(f"bg {i}" for i in range(count)), *(f"after {j}" for j in range(5))]
    log = root / "command.log"
    wait_for(lambda: sorted(log.read_text().splitlines()) == sorted(expected))
    assert [line for line in log.read_text().splitlines() if line != "main done"] == expected[1:]


def test_a_reader_of_our_stdout_that_goes_away_costs_the_echo_only(tmp_path: Path) -> None:
    # `gpuherd --record ... | head -1`: the command goes on, and the log gets every line.
    root = tmp_path / "s"
    script = (
        "import time\n"
        "for i in range(40):\n"
        "    print(f'line {i}', flush=True)\n"
        "    time.sleep(0.02)\n"
    )
    proc = subprocess.Popen(
        [PY, "-m", "gpuherd", "--record", str(root), "--", PY, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"line 0\n"
    proc.stdout.close()
    assert proc.wait(60) == 0
    assert (root / "command.log").read_text().splitlines() == [f"line {i}" for i in range(40)]
    assert [e["exit_code"] for e in events(root) if e["kind"] == "exit"] == [0]


def test_an_unusable_log_is_said_on_stderr(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.log"
    (tmp_path / "other.log").symlink_to(loop)
    loop.symlink_to(tmp_path / "other.log")
    out = run(
        "--record", str(tmp_path / "s"), "--duration", "2s", "--log", str(fifo), "--log", str(loop)
    )
    assert out.returncode == 0, out.stderr
    said = {line for line in out.stderr.splitlines() if line.startswith("gpuherd: not following")}
    assert said == {
        f"gpuherd: not following {fifo}: is not a regular file (pipes and devices cannot be "
        "followed)",
        f"gpuherd: not following {loop}: cannot open: Too many levels of symbolic links",
    }

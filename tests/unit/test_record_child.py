"""The recorded command, run as a real subprocess: log, exit status, signals, start errors."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from gpuherd.proc.child import ChildCommand, CommandStartError, exit_status

PY = sys.executable


def run_to_end(argv: list[str], log: Path, echo: bool = False) -> int:
    child = ChildCommand(argv, log, echo=echo)
    child.start()
    code = child.wait(30)
    child.finish()
    assert code is not None
    return code


def test_output_goes_to_the_log_and_the_exit_status_comes_back(tmp_path: Path) -> None:
    log = tmp_path / "command.log"
    script = (
        "import sys; print('out line 1'); sys.stdout.flush(); "
        "print('err line', file=sys.stderr); sys.stderr.flush(); print('out line 2'); "
        "sys.exit(7)"
    )
    assert run_to_end([PY, "-c", script], log) == 7
    text = log.read_text()
    assert sorted(text.splitlines()) == ["err line", "out line 1", "out line 2"]


def test_output_is_echoed_to_our_own_streams(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    run_to_end(
        [PY, "-c", "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"],
        tmp_path / "command.log",
        echo=True,
    )
    out, err = capfdbinary.readouterr()
    assert out == b"to stdout\n" and err == b"to stderr\n"


def test_progress_redraws_without_newline_arrive_as_they_are_written(tmp_path: Path) -> None:
    log = tmp_path / "command.log"
    script = (
        "import sys, time\n"
        "for i in range(3):\n"
        "    sys.stdout.write(f'\\r{i}/3 loss=1.{i}'); sys.stdout.flush(); time.sleep(0.05)\n"
        "time.sleep(2)\n"
    )
    child = ChildCommand([PY, "-c", script], log, echo=False)
    child.start()
    try:
        deadline = time.monotonic() + 1.5
        while b"2/3" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert log.read_bytes() == b"\r0/3 loss=1.0\r1/3 loss=1.1\r2/3 loss=1.2"
        assert child.poll() is None  # seen while the command still runs
    finally:
        child.forward(signal.SIGKILL)
        child.wait(10)
        child.finish()


def test_python_output_is_unbuffered_through_the_pipe(tmp_path: Path) -> None:
    log = tmp_path / "command.log"
    child = ChildCommand([PY, "-c", "import time; print('early'); time.sleep(5)"], log, echo=False)
    child.start()
    try:
        deadline = time.monotonic() + 3
        while "early" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert log.read_text() == "early\n"
    finally:
        child.forward(signal.SIGTERM)
        child.wait(10)
        child.finish()


def test_a_command_that_does_not_exist_is_127(tmp_path: Path) -> None:
    with pytest.raises(CommandStartError) as caught:
        ChildCommand(["no-such-command-gpuherd-test"], tmp_path / "c.log").start()
    assert caught.value.exit_code == 127
    assert caught.value.msg == "command not found: no-such-command-gpuherd-test"


def test_a_file_that_is_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(CommandStartError) as caught:
        ChildCommand([str(script)], tmp_path / "c.log").start()
    assert caught.value.exit_code == 126
    assert "not executable" in caught.value.msg


def test_a_command_that_exits_at_once_is_fine(tmp_path: Path) -> None:
    assert run_to_end(["true"], tmp_path / "c.log") == 0
    assert run_to_end(["false"], tmp_path / "c2.log") == 1
    assert (tmp_path / "c.log").read_text() == ""


def test_forwarded_sigint_reaches_the_whole_process_group(tmp_path: Path) -> None:
    # The command starts a grandchild; both must get the signal, as with Ctrl-C in a shell.
    log = tmp_path / "command.log"
    script = (
        "import signal, subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', "
        "'import signal,sys,time\\n"
        'signal.signal(signal.SIGINT, lambda *a: (print("grandchild got SIGINT", '
        "flush=True), sys.exit(0)))\\n"
        'print("ready", flush=True)\\ntime.sleep(30)\'])\n'
        "def stop(*a):\n"
        "    g.wait(); print('child got SIGINT', flush=True); sys.exit(5)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "time.sleep(30)\n"
    )
    child = ChildCommand([PY, "-c", script], log, echo=False)
    child.start()
    deadline = time.monotonic() + 10
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.forward(signal.SIGINT) == signal.SIGINT
    assert child.wait(10) == 5
    child.finish()
    lines = log.read_text().splitlines()
    assert lines == ["ready", "grandchild got SIGINT", "child got SIGINT"]


def test_the_third_signal_kills(tmp_path: Path) -> None:
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(30)\n"
    child = ChildCommand([PY, "-c", script], tmp_path / "c.log", echo=False)
    child.start()
    time.sleep(0.3)
    assert child.forward(signal.SIGTERM) == signal.SIGTERM
    assert child.forward(signal.SIGTERM) == signal.SIGTERM
    assert child.wait(0.5) is None  # it ignores SIGTERM
    assert child.forward(signal.SIGTERM) == signal.SIGKILL
    assert child.wait(10) == 128 + signal.SIGKILL
    child.finish()
    assert child.forward(signal.SIGTERM) == 0  # already gone


def test_exit_status_follows_the_shell() -> None:
    assert exit_status(0) == 0 and exit_status(3) == 3
    assert exit_status(-signal.SIGINT) == 130
    assert exit_status(-signal.SIGKILL) == 137


def test_a_full_disk_never_stops_the_command_and_the_loss_is_counted(tmp_path: Path) -> None:
    # /dev/full fails every write with ENOSPC, as a full disk does.
    errors: list[OSError] = []
    record = tmp_path / "command.exit.json"
    script = "import sys\nfor i in range(2000):\n    print('x' * 99)\nsys.exit(4)\n"
    child = ChildCommand(
        [PY, "-c", script],
        Path("/dev/full"),
        echo=False,
        on_log_error=errors.append,
        exit_path=record,
    )
    child.start()
    assert child.wait(60) == 4
    child.finish()
    assert [e.errno for e in errors] == [errno.ENOSPC]
    assert child.log_dropped_bytes == 2000 * 100
    exit_record = json.loads(record.read_text())
    assert (exit_record["exit_code"], exit_record["log_dropped_bytes"]) == (4, 200_000)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX only")
def test_the_command_is_not_in_our_process_group(tmp_path: Path) -> None:
    child = ChildCommand(["sleep", "5"], tmp_path / "c.log", echo=False)
    child.start()
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    finally:
        child.forward(signal.SIGKILL)
        child.wait(10)
        child.finish()


def test_stdout_and_stderr_lines_are_never_spliced_in_the_log(tmp_path: Path) -> None:
    # Unbuffered print() writes the text and the newline in two calls; both streams busy.
    script = (
        "import sys, threading\n"
        "def spam(stream, tag):\n"
        "    for i in range(400):\n"
        "        print(f'{tag} line {i} loss=0.{i}', file=stream)\n"
        "t = threading.Thread(target=spam, args=(sys.stderr, 'err'))\n"
        "t.start(); spam(sys.stdout, 'out'); t.join()\n"
    )
    log = tmp_path / "command.log"
    assert run_to_end([PY, "-u", "-c", script], log) == 0
    lines = log.read_text().splitlines()
    expected = {f"{tag} line {i} loss=0.{i}" for tag in ("out", "err") for i in range(400)}
    assert sorted(lines) == sorted(expected)


def test_the_exit_is_recorded_next_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "command.log"
    assert run_to_end([PY, "-c", "import sys; print('bye'); sys.exit(9)"], log) == 9
    record = json.loads((tmp_path / "command.exit.json").read_text())
    assert record["exit_code"] == 9 and record["log_dropped_bytes"] == 0
    assert record["command"][1:] == ["-c", "import sys; print('bye'); sys.exit(9)"]
    assert record["started_at"] <= record["ended_at"] and isinstance(record["pid"], int)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_command_that_cannot_start_is_recorded_too(tmp_path: Path) -> None:
    with pytest.raises(CommandStartError):
        ChildCommand(["no-such-command-gpuherd-test"], tmp_path / "command.log").start()
    record = json.loads((tmp_path / "command.exit.json").read_text())
    assert (record["exit_code"], record["error"]) == (
        127,
        "command not found: no-such-command-gpuherd-test",
    )


def _wait_until(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_line_without_end_is_logged_while_it_is_written(tmp_path: Path) -> None:
    # The partial line used to be joined again for every 64 KiB chunk (40 MiB without newline
    # took 17 s, 200 MB never finished) and kept whole in memory until the stream paused.
    log, stop, count = tmp_path / "command.log", tmp_path / "stop", tmp_path / "count"
    script = (
        "import os, sys\n"
        "chunk, n = b'x' * 65536, 0\n"
        f"while not os.path.exists({str(stop)!r}) and n < (64 << 20):\n"
        "    sys.stdout.buffer.write(chunk)\n"
        "    n += len(chunk)\n"
        f"open({str(count)!r}, 'w').write(str(n))\n"
    )
    child = ChildCommand([PY, "-c", script], log, echo=False)
    child.start()
    try:
        grew = _wait_until(lambda: log.stat().st_size >= 8 << 20 or child.poll() is not None, 60)
        running_while_logged = grew and child.poll() is None and log.stat().st_size >= 8 << 20
    finally:
        stop.touch()
    assert child.wait(120) == 0
    child.finish()
    assert running_while_logged
    total = int(count.read_text())
    assert log.stat().st_size == total
    with open(log, "rb") as f:
        while block := f.read(1 << 20):
            assert block == b"x" * len(block)


FLOOD = """
import random, sys, threading
def spam(stream, tag, seed):
    rnd, out = random.Random(seed), stream.buffer
    for i in range(20000):
        text = (f'{tag} {i} ' + 'y' * rnd.randrange(0, 400)).encode()
        if i % 3 == 0:  # the text and its newline in two writes, as print() does
            out.write(text)
            out.flush()
            out.write(b'\\n')
        else:
            out.write(text + b'\\n')
        if i % 7 == 0:
            out.flush()
    out.flush()
t = threading.Thread(target=spam, args=(sys.stderr, 'err', 2))
t.start()
spam(sys.stdout, 'out', 1)
t.join()
"""


def _flood_lines(tag: str, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [f"{tag} {i} ".encode() + b"y" * rnd.randrange(0, 400) for i in range(20000)]


def test_a_flood_on_both_streams_is_logged_and_echoed_byte_for_byte(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    log = tmp_path / "command.log"
    assert run_to_end([PY, "-c", FLOOD], log, echo=True) == 0
    out, err = _flood_lines("out", 1), _flood_lines("err", 2)
    logged = log.read_bytes()
    assert len(logged) == sum(len(line) + 1 for line in out + err)
    lines = logged.split(b"\n")
    assert lines.pop() == b""
    assert [line for line in lines if line.startswith(b"out ")] == out
    assert [line for line in lines if line.startswith(b"err ")] == err
    assert len(lines) == len(out) + len(err)  # no line of one stream cut by the other
    echoed_out, echoed_err = capfdbinary.readouterr()
    assert echoed_out == b"".join(line + b"\n" for line in out)
    assert echoed_err == b"".join(line + b"\n" for line in err)


def test_the_working_directory_cannot_replace_the_supervisor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording from inside a checkout of another gpuherd version, or next to a `subprocess.py`.
    (tmp_path / "gpuherd").mkdir()
    (tmp_path / "gpuherd" / "__init__.py").write_text("raise SystemExit('wrong gpuherd')\n")
    (tmp_path / "subprocess.py").write_text("raise SystemExit('wrong subprocess')\n")
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "command.log"
    assert run_to_end(["sh", "-c", "echo ran in $PWD; exit 6"], log) == 6
    assert log.read_text() == f"ran in {tmp_path}\n"

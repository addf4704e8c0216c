"""At stop, every followed log is recorded to its end; whatever is not is counted and reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from collectors.loop import run_collector
from gpuherd.record.dashboard import DashboardRecording, record_options
from gpuherd.record.drain import STALLED, LogDrain
from gpuherd.record.recording import Recording, RecordingOptions
from tests.recorded import loss_steps as steps

pytestmark = pytest.mark.slow  # logs of 10^5 to 10^6 lines

PY = sys.executable


def write_log(path: Path, lines: int, start: int = 0) -> None:
    with open(path, "w") as f:
        for first in range(start, start + lines, 50_000):
            last = min(start + lines, first + 50_000)
            f.write("".join(f"step={i} loss={1 / (i + 1):.6f}\n" for i in range(first, last)))


def events(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines()]


def test_a_flood_printed_just_before_exit_is_recorded_whole(tmp_path: Path) -> None:
    # Used to lose a third to a half of it here: the tail got 3 s after the command ended.
    root = tmp_path / "s"
    script = (
        "import sys\nw = sys.stdout.write\n"
        "for i in range(150_000):\n"
        "    w(f'step={i} loss={1 / (i + 1):.6f} lr=0.0001 grad_norm={1 / (i % 97 + 1):.4f}"
        "\\n')\n"
    )
    out = subprocess.run(
        [
            PY,
            "-m",
            "gpuherd",
            "--record",
            str(root),
            "--peak-interval",
            "0",
            "--",
            PY,
            "-c",
            script,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert steps(root, "command") == list(range(150_000))
    assert not [e for e in events(root) if e["kind"] == "log_dropped"]
    assert "not recorded" not in out.stderr
    [task] = json.loads((root / "meta.json").read_text())["tasks"]
    assert (task["lines"], task["metric_rows"], task["unread_bytes"]) == (150_000, 450_000, 0)


def test_a_big_log_is_read_to_its_end_after_a_short_duration(tmp_path: Path) -> None:
    # `--log` of a file far larger than the tail reads in --duration plus the old 3 s drain.
    log, root = tmp_path / "big.log", tmp_path / "s"
    write_log(log, 600_000)
    out = subprocess.run(
        [
            PY,
            "-m",
            "gpuherd",
            "--record",
            str(root),
            "--duration",
            "1",
            "--peak-interval",
            "0",
            "--log",
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert steps(root) == list(range(600_000))
    assert not [e for e in events(root) if e["kind"] == "log_dropped"]


def test_a_second_interrupt_stops_reading_and_says_exactly_how_much_was_left(
    tmp_path: Path,
) -> None:
    log, root = tmp_path / "huge.log", tmp_path / "s"
    write_log(log, 3_000_000)  # 70 MB: much more than a few seconds of reading
    size = log.stat().st_size
    proc = subprocess.Popen(
        [PY, "-m", "gpuherd", "--record", str(root), "--peak-interval", "0", "--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 60
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            time.sleep(0.05)

    wait_for("recording into")
    proc.send_signal(signal.SIGINT)  # stop recording: reading the log to its end begins
    wait_for("reading the rest of the logs")
    proc.send_signal(signal.SIGINT)  # and stop that too
    assert proc.wait(timeout=60) == 0
    reader.join(10)
    [dropped] = [e for e in events(root) if e["kind"] == "log_dropped"]
    assert (dropped["reason"], dropped["task"], dropped["path"]) == (
        "interrupted",
        str(log),
        str(log),
    )
    # Exact: the rows recorded are the lines of the first size - unread bytes of the log.
    recorded = size - dropped["unread_bytes"]
    with open(log, "rb") as f:
        complete_lines = f.read(recorded).count(b"\n")
    assert 0 < recorded < size
    assert steps(root) == list(range(complete_lines))
    stderr = "".join(lines)
    assert f"{dropped['unread_bytes'] / 1e6:,.1f} MB" in stderr
    assert "not recorded: reading was interrupted" in stderr
    [task] = json.loads((root / "meta.json").read_text())["tasks"]
    assert task["unread_bytes"] == dropped["unread_bytes"]
    summary = json.loads((root / "summary.json").read_text())
    assert [
        e["unread_bytes"] for e in summary["events"]["notable"] if e["kind"] == "log_dropped"
    ] == [dropped["unread_bytes"]]
    assert dropped["msg"] in (root / "summary.md").read_text()


def test_the_dashboard_closing_path_reads_its_tails_to_the_end(tmp_path: Path) -> None:
    # `--tui --record`: the dashboard runs the tails and feeds the recording through `tap`;
    # closing used to give them 3 s.
    log = tmp_path / "train.log"
    write_log(log, 400_000)
    session = DashboardRecording(tmp_path / "s", record_options([str(log)], [], [], 1.0, 0.0))
    session.start()
    stop = threading.Event()
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.05)
    thread = threading.Thread(target=run_collector, args=(tail, session.tap, stop), daemon=True)
    thread.start()
    try:
        result = session.finish()
    finally:
        stop.set()
        tail.wake()
        thread.join(10)
    assert result.error is None and not result.warnings
    assert steps(tmp_path / "s") == list(range(400_000))


def test_a_log_that_stops_making_progress_is_reported_as_stalled(tmp_path: Path) -> None:
    # A hung filesystem or a log that cannot be read any more: nothing advances the offsets.
    log = tmp_path / "train.log"
    write_log(log, 1000)
    offsets = {str(log): 5000}
    drain = LogDrain(offsets, stall_s=0.3)
    notices: list[str] = []
    started = time.monotonic()
    drain.run([str(log)], notice=notices.append)
    assert 0.3 <= time.monotonic() - started < 5
    assert drain.reason == STALLED
    [unread] = drain.unread({str(log): 0.01})
    assert (unread.unread_bytes, unread.lines_estimate) == (
        log.stat().st_size - 5000,
        round((log.stat().st_size - 5000) * 0.01),
    )
    offsets[str(log)] = os.path.getsize(log)  # caught up after all: nothing is unread
    assert drain.left_bytes() == 0


def test_findings_over_the_per_read_cap_are_counted_and_reported(tmp_path: Path) -> None:
    log, root = tmp_path / "train.log", tmp_path / "s"
    log.write_text(
        "".join(f"step={i} loss=0.5\nRuntimeError: CUDA out of memory ({i})\n" for i in range(1000))
    )
    recording = Recording(root, RecordingOptions(logs=[str(log)], peak_interval_s=0))
    recording.start()
    assert recording.stop() is None
    found = [e for e in events(root) if e["kind"] == "finding"]
    [dropped] = [e for e in events(root) if e["kind"] == "log_dropped"]
    assert len(found) + dropped["findings"] == 1000 and dropped["findings"] > 0
    assert recording.warnings == [dropped["msg"]]
    assert dropped["msg"].startswith(f"{dropped['findings']:,} findings of {log} not recorded")
    [task] = json.loads((root / "meta.json").read_text())["tasks"]
    assert (task["findings"], task["findings_dropped"]) == (len(found), dropped["findings"])
    assert steps(root) == list(range(1000))


def test_a_log_renamed_away_as_the_recording_stops_is_still_read_to_its_end(tmp_path: Path):
    log, root = tmp_path / "train.log", tmp_path / "s"
    write_log(log, 300_000)
    recording = Recording(root, RecordingOptions(logs=[str(log)], peak_interval_s=0))
    recording.start()
    deadline = time.monotonic() + 30
    while not recording.log_sink.offsets.get(str(log)):  # the tail has the file open
        assert time.monotonic() < deadline
        time.sleep(0.01)
    log.rename(tmp_path / "train.log.1")  # rotated, no new file yet: the tail keeps reading
    assert recording.stop() is None
    assert steps(root) == list(range(300_000))
    assert not [e for e in events(root) if e["kind"] == "log_dropped"]


def test_a_followed_path_that_is_no_regular_file_leaves_nothing_to_read(tmp_path: Path) -> None:
    # `record --log DIR` once waited 10 s at the end and warned of the directory's own 4,096
    # bytes "not recorded"; a FIFO's size is no log content either. A regular file beside them
    # still counts, to its byte.
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a").write_text("x" * 5000)  # the directory has a size of its own
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    log = tmp_path / "train.log"
    write_log(log, 100)
    drain = LogDrain({str(log): 100}, stall_s=0.3)
    drain.run([str(folder), str(fifo), str(log)])
    assert drain.reason == STALLED
    assert [(u.path, u.unread_bytes) for u in drain.unread()] == [
        (str(log), log.stat().st_size - 100)
    ]

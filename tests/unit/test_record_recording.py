"""A whole recording in-process: real threads, a real child command, FakeNvml at the NVML seam."""

from __future__ import annotations

import csv
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from collectors.base import Sampled
from collectors.logs.discovery import DiscoveredLog, DiscoveredLogs
from collectors.machine.nvml import ProcessEntry
from gpuherd.record.command import finish, record_command, record_until_stopped
from gpuherd.record.peaks import BASELINE, PER_PROCESS
from gpuherd.record.recording import Recording, RecordingOptions
from gpuherd.session.session import SessionLockedError
from tests.fakes import FakeGpu, FakeNvml, GiB

TRAIN = """
import sys, time
print("ready", flush=True)
for step in range(1, 6):
    time.sleep(0.15)
    print(f"epoch 0 step {step * 100} loss={3.0 / step:.3f} acc={0.1 * step:.2f}", flush=True)
print("RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB", file=sys.stderr)
sys.exit(0)
"""


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def events(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines()]


class SpikeDriver:
    """Plays the GPU side of a training run on a FakeNvml while the real command runs.

    Once the command printed `ready`, the command's pid holds 4 GiB (per-process data), and one
    20 GiB spike lasts 80 ms between two 1 Hz rows.
    """

    def __init__(self, fake: FakeNvml, log: Path, per_process: bool) -> None:
        self.fake, self.log, self.per_process = fake, log, per_process
        self.pid: int | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        deadline = time.monotonic() + 20
        while (
            not self.log.exists() or "ready" not in self.log.read_text()
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        gpu = self.fake.gpus[0]
        pid = self.pid if self.per_process and self.pid else 999_999_999
        gpu.used, gpu.compute = 5 * GiB, [ProcessEntry(pid, 4 * GiB)]
        time.sleep(0.25)
        gpu.used = 25 * GiB
        time.sleep(0.08)
        gpu.used = 5 * GiB


def start(root: Path, fake: FakeNvml, **options) -> Recording:
    options = {"interval_s": 1.0, **options}
    recording = Recording(
        root, RecordingOptions(nvml_backend=fake, peak_interval_s=0.005, **options)
    )
    recording.start()
    return recording


@pytest.mark.parametrize("per_process", [True, False])
def test_recording_a_command_catches_its_spike_and_its_metrics(
    tmp_path: Path, per_process: bool
) -> None:
    fake = FakeNvml([FakeGpu(used=1 * GiB, reserved=0)])
    root = tmp_path / "session"
    argv = [sys.executable, "-c", TRAIN]
    recording = start(root, fake, command=argv, interval_s=0.3)
    driver = SpikeDriver(fake, root / "command.log", per_process)
    original = recording.command_started

    def started(pid: int) -> None:
        driver.pid = pid
        original(pid)
        driver.thread.start()

    recording.command_started = started  # type: ignore[method-assign]
    code = record_command(recording, argv, deadline=None)
    assert code == 0
    assert finish(recording, code) is None

    gpu = rows(root / "gpu.csv")
    peaks = [int(r["mem_peak_bytes"]) for r in gpu if r["mem_peak_bytes"]]
    assert max(peaks) == 25 * GiB  # the 80 ms spike, between two full rows
    meta = json.loads((root / "meta.json").read_text())
    assert meta["exit_code"] == 0 and meta["ended_at"] is not None
    [run_peak] = meta["run_peaks"]
    if per_process:
        # Others held 1 GiB (5 - 4): the spike attributed to the command is 24 GiB.
        assert (run_peak["method"], run_peak["peak_bytes"]) == (PER_PROCESS, 24 * GiB)
    else:
        assert (run_peak["method"], run_peak["peak_bytes"]) == (BASELINE, 24 * GiB)
        assert run_peak["baseline_bytes"] == 1 * GiB
    kinds = [e["kind"] for e in events(root)]
    # A collector with nothing to read here (no Docker engine) may say so before the start.
    commands = [kind for kind in kinds if kind != "collector_unavailable"]
    assert commands[0] == "start" and commands.count("start") == commands.count("exit") == 1
    # The OOM line is written just before the exit: the end of recording still reads it.
    assert {"kind": "finding", "task": "command", "finding": "oom"}.items() <= next(
        e for e in events(root) if e["kind"] == "finding"
    ).items()
    metrics = rows(root / "metrics.csv")
    losses = [float(r["value"]) for r in metrics if r["metric"] == "train/loss"]
    assert losses == [3.0, 1.5, 1.0, 0.75, 0.6]
    assert {r["task"] for r in metrics} == {"command"}
    summary = json.loads((root / "summary.json").read_text())
    assert summary["gpus"][0]["peak_mem_bytes"] == 25 * GiB
    assert summary["tasks"][0]["metrics"]["train/loss"]["last"] == 0.6
    assert not (root / ".lock").exists()


def test_recording_without_a_command_until_the_deadline(tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu(used=3 * GiB, reserved=0)])
    root = tmp_path / "session"
    recording = start(root, fake)
    began = time.monotonic()
    assert record_until_stopped(recording, deadline=time.monotonic() + 1.6) is False
    assert time.monotonic() - began >= 1.5
    assert finish(recording, None) is None
    gpu = rows(root / "gpu.csv")
    assert len(gpu) >= 2 and all(int(r["mem_peak_bytes"]) == 3 * GiB for r in gpu)
    assert json.loads((root / "meta.json").read_text())["run_peaks"] == []


def test_a_second_recorder_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu()])
    first = start(tmp_path / "s", fake)
    try:
        with pytest.raises(SessionLockedError, match="is being recorded by pid"):
            Recording(tmp_path / "s", RecordingOptions(nvml_backend=fake)).start()
    finally:
        first.stop()


def test_log_files_are_tasks_named_by_their_path(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss=2.5\n")
    fake = FakeNvml([FakeGpu()])
    root = tmp_path / "session"
    recording = start(root, fake, logs=[str(log)])
    with open(log, "a") as f:
        f.write("step 2 loss=2.0\n")
    time.sleep(0.3)
    recording.stop()
    metrics = rows(root / "metrics.csv")
    assert [(r["task"], r["line"], r["value"]) for r in metrics if r["metric"] == "train/loss"] == [
        (str(log), "1", "2.5"),
        (str(log), "2", "2.0"),
    ]
    meta = json.loads((root / "meta.json").read_text())
    assert meta["tasks"][0]["task"] == str(log) and meta["tasks"][0]["lines"] == 2


def write_metrics_csv(path: Path, losses: list[float]) -> str:
    """A Lightning `CSVLogger` file, written whole as Lightning does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"0,{10 * (i + 1)},{loss}\n" for i, loss in enumerate(losses))
    path.write_text("epoch,step,train_loss\n" + body)
    return str(path)


def wait_for(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def losses_by_task(root: Path) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for row in rows(root / "metrics.csv"):
        if row["metric"] == "train/loss":
            found.setdefault(row["task"], []).append(float(row["value"]))
    return found


def test_globs_and_watched_directories_find_files_that_appear_while_recording(
    tmp_path: Path,
) -> None:
    pattern = str(tmp_path / "logs" / "version_*" / "metrics.csv")
    watched = tmp_path / "watched"
    watched.mkdir()
    root = tmp_path / "session"
    recording = start(
        root, FakeNvml([FakeGpu()]), logs=[pattern], watch=[str(watched)], discovery_interval_s=0.1
    )
    time.sleep(0.3)  # the first scans have run: these files are new to them
    globbed = write_metrics_csv(tmp_path / "logs" / "version_0" / "metrics.csv", [0.5, 0.4])
    lightning = write_metrics_csv(watched / "demo" / "version_3" / "metrics.csv", [0.9])
    wait_for(lambda: {globbed, lightning} <= recording.log_sink.offsets.keys())
    with open(globbed, "a") as f:  # a file found later is followed from then on
        f.write("0,30,0.3\n")
    recording.stop()
    assert losses_by_task(root) == {globbed: [0.5, 0.4, 0.3], lightning: [0.9]}
    found = [(e["task"], e["source"]) for e in events(root) if e["kind"] == "log_found"]
    assert sorted(found) == sorted([(globbed, pattern), (lightning, str(watched))])


def test_a_file_written_just_before_the_end_is_read(tmp_path: Path) -> None:
    # Lightning writes metrics.csv when fit ends, after the last periodic scan.
    root = tmp_path / "session"
    recording = start(root, FakeNvml([FakeGpu()]), watch=[str(tmp_path)], discovery_interval_s=3600)
    time.sleep(0.3)  # the periodic scan ran once, and will not run again
    last = write_metrics_csv(
        tmp_path / "lightning_logs" / "version_0" / "metrics.csv", [0.7, 0.6, 0.5]
    )
    recording.stop()
    # Only the run's file: the session's own events.jsonl and command.log are never tasks.
    assert losses_by_task(root) == {last: [0.7, 0.6, 0.5]}
    assert [t["task"] for t in json.loads((root / "meta.json").read_text())["tasks"]] == [last]


def test_a_dashboards_discovery_scans_start_no_tails_of_the_recording(tmp_path: Path) -> None:
    log = write_metrics_csv(tmp_path / "logs" / "version_0" / "metrics.csv", [0.5])
    root = tmp_path / "session"
    recording = Recording(
        root,
        RecordingOptions(
            own_collectors=False,
            peak_interval_s=0,
            nvml_backend=FakeNvml([FakeGpu()]),
            watch=[str(tmp_path)],
        ),
    )
    recording.start()
    found = DiscoveredLog(log, "lightning_csv", str(tmp_path))
    recording.emit(Sampled("discovery", DiscoveredLogs(time.time(), (found,), (found,))))
    recording.stop()
    assert not (root / "metrics.csv").exists()
    assert not (root / "events.jsonl").exists()  # no log_found, no sample_not_recorded

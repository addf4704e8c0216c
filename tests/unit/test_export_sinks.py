"""The exporter beside the recorder and alone: real threads, real processes, real scrapes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.samples import GpuSample, GpuTick
from gpuherd.export.address import parse_listen
from gpuherd.export.exporter import Exporter
from gpuherd.export.headless import Feed, running_set, sink
from gpuherd.record.recording import Recording, RecordingOptions
from tests.fakes import FakeCollector, FakeGpu, FakeNvml, GiB
from tests.prometheus import free_port, get, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_real_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Live exporters read this machine's job queue: never the person's own in a test.
    monkeypatch.setenv("GPUHERD_STATE_DIR", str(tmp_path / "queue-state"))
    monkeypatch.setenv("GPUHERD_LEDGER_DIR", str(tmp_path / "queue-ledger"))


def values(port: int, name: str, **labels: str) -> list[float]:
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return []
    return [
        s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def test_a_recording_feeds_the_exporter_its_ticks_and_the_fast_samplers_peak(
    tmp_path: Path,
) -> None:
    fake = FakeNvml([FakeGpu(uuid="GPU-rec", used=3 * GiB, reserved=0)])
    port = free_port()
    exporter = Exporter(parse_listen(str(port)), "rec-box", report=lambda line: None)
    options = RecordingOptions(
        nvml_backend=fake,
        interval_s=0.5,
        peak_interval_s=0.01,
        tap=exporter.emit,
        on_peaks=exporter.add_peaks,
    )
    recording = Recording(tmp_path / "session", options)
    recording.start()
    exporter.start()
    try:
        wait_for(
            lambda: values(port, "gpuherd_gpu_memory_used_bytes", uuid="GPU-rec") == [3 * GiB],
            what="the first tick",
        )
        readings = recording.tracker.readings
        fake.gpus[0].used = 9 * GiB  # a 150 ms spike, between two full rows most of the time
        wait_for(lambda: recording.tracker.readings >= readings + 3, what="fast readings")
        time.sleep(0.15)
        fake.gpus[0].used = 3 * GiB
        wait_for(
            lambda: values(port, "gpuherd_gpu_memory_peak_bytes", uuid="GPU-rec") == [9 * GiB],
            what="the peak",
        )
        wait_for(
            lambda: values(port, "gpuherd_gpu_memory_used_bytes", uuid="GPU-rec") == [3 * GiB],
            what="used back down",
        )
        assert values(port, "gpuherd_gpu_memory_peak_bytes", uuid="GPU-rec") == [9 * GiB]
    finally:
        recording.stop()
        exporter.close()


TRAIN = """
import time
for step in range(1, 4):
    print(f"step: {step} loss: {3.0 / step:.3f}", flush=True)
    time.sleep(0.2)
time.sleep(60)
"""


def test_record_serve_metrics_exports_the_recorded_command_as_the_command_task(
    tmp_path: Path,
) -> None:
    port = free_port()
    session = tmp_path / "session"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "record",
            str(session),
            "--serve-metrics",
            str(port),
            "--peak-interval",
            "0",
            "--",
            sys.executable,
            "-c",
            TRAIN,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: values(port, "gpuherd_task_loss", task="command") == [1.0],
            what="the command's last loss",
        )
        assert values(port, "gpuherd_task_step", task="command") == [3.0]
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # gpuherd forwards it to the command
        _, stderr = process.communicate(timeout=60)
    assert f"gpuherd: serving metrics on http://127.0.0.1:{port}/metrics" in stderr
    assert (session / "meta.json").exists() and "Traceback" not in stderr
    assert get(f"http://127.0.0.1:{port}/metrics")[0] == 0  # closed with the recording


def test_serve_metrics_alone_follows_a_log_of_this_machine(tmp_path: Path) -> None:
    log = tmp_path / "exp1" / "train.log"
    log.parent.mkdir()
    log.write_text("step: 1 loss: 2.5\n")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "serve-metrics",
            str(port),
            "--log",
            str(log),
            "--interval",
            "0.2",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: values(port, "gpuherd_task_loss", task="exp1/train.log") == [2.5],
            what="the first loss",
        )
        with open(log, "a") as f:
            f.write("step: 2 loss: 1.25\n")
        wait_for(
            lambda: values(port, "gpuherd_task_loss", task="exp1/train.log") == [1.25],
            what="the appended loss",
        )
        assert values(port, "gpuherd_task_step", task="exp1/train.log") == [2.0]
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    assert stderr.splitlines()[0].startswith("gpuherd: serving metrics of ")
    assert "Traceback" not in stderr


def test_a_source_that_crashes_leaves_the_exporter_serving(capsys) -> None:
    """A collector raising a bug inside its loop: it is said once, the others and the server
    go on."""
    port = free_port()
    exporter = Exporter(parse_listen(str(port)), "box-1", report=lambda line: None)
    broken = FakeCollector([ZeroDivisionError("a bug in a collector")], name="broken")
    good = FakeCollector(
        [GpuTick(1.0, (GpuSample(0, "GPU-a", "H100", memory_used_bytes=GiB),))], name="nvml"
    )
    running = running_set(Feed("box-1", [broken, good]))
    running.attach(sink(exporter))
    exporter.start()
    try:
        running.run()
        wait_for(
            lambda: values(port, "gpuherd_gpu_memory_used_bytes") == [GiB],
            what="the good source's sample",
        )
        wait_for(lambda: broken.closed == 1, what="the broken source's loop to end")
        assert values(port, "gpuherd_exporter_info", host="box-1") == [1.0]
    finally:
        running.stop()
        exporter.close()
    assert capsys.readouterr().err == "gpuherd: metrics: broken: a bug in a collector\n"

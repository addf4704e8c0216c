"""The training behind a W&B run (written by its `wandb-core` child) and behind an MLflow file
store run (files opened and closed at each write): real processes in the real /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from collectors.machine.writers import LogWriters, WriterCollector, WriterWatch, scan
from collectors.trackers.mlflow_files import MlflowFileRun

# The training: starts a child that holds argv[1] open for writing (as wandb-core holds
# run-<id>.wandb), prints the child's pid once the file is open, and sleeps.
TRAINING = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[1], sys.argv[2]],
                         stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(120)
"""
HELPER = r"""
import sys, time
with open(sys.argv[1], sys.argv[2]) as f:
    f.write(b":W&B\xe1\xbe\x00" if "b" in sys.argv[2] else "")
    f.flush()
    print("ready", flush=True)
    time.sleep(120)
"""
# Appends a `timestamp value step` line to an MLflow metric file and closes it, every 50 ms,
# as MLflow's FileStore does, from the directory holding `mlruns`.
MLFLOW_WRITER = r"""
import sys, time
for step in range(100000):
    with open(sys.argv[1], "a") as f:
        f.write(f"{int(time.time() * 1000)} 0.5 {step}\n")
    if step == 0:
        print("ready", flush=True)
    time.sleep(0.05)
"""


def stop(*pids: str) -> None:
    """Kill the helper children (the fixture kills and reaps the processes it started)."""
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)


def start(
    procs: list[subprocess.Popen[str]], code: str, *args: str, cwd: Path | None = None
) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, cwd=cwd
    )
    procs.append(proc)
    assert proc.stdout is not None
    return proc.pid, proc.stdout.readline().strip()


def test_a_wandb_run_log_written_by_a_child_has_the_training_as_writer(
    tmp_path: Path, procs
) -> None:
    log = tmp_path / "wandb" / "offline-run-x" / "run-x.wandb"
    log.parent.mkdir(parents=True)
    training, child = start(procs, TRAINING, str(log), "ab", HELPER)
    try:
        found = scan({"t": str(log.resolve())}, [training])
    finally:
        stop(child)
    assert found == {"t": LogWriters("t", (training,), (training,))}


def test_a_child_that_only_reads_the_run_log_or_writes_another_file_is_not_looked_at(
    tmp_path: Path, procs
) -> None:
    log = tmp_path / "run-x.wandb"
    log.write_bytes(b":W&B\xe1\xbe\x00")
    console = tmp_path / "output.log"
    reader, reading = start(procs, TRAINING, str(log), "rb", HELPER)
    writer, writing = start(procs, TRAINING, str(console), "a", HELPER)
    try:
        read_only = scan({"t": str(log.resolve())}, [reader])
        # a console log written by a child (a data loader worker) stays as before: untied
        other_file = scan({"c": str(console.resolve())}, [writer])
    finally:
        stop(reading, writing)
    assert read_only == {} and other_file == {}


def test_an_mlflow_file_store_run_is_tied_to_the_job_running_above_mlruns(
    tmp_path: Path, procs
) -> None:
    where = tmp_path / "proj"
    run = where / "mlruns" / "0" / ("a" * 32)
    (run / "metrics" / "train").mkdir(parents=True)
    (run / "meta.yaml").write_text(f"run_id: {run.name}\nrun_name: r\nstatus: 1\n")
    metric = run / "metrics" / "train" / "loss"
    pid, _ = start(procs, MLFLOW_WRITER, os.path.relpath(metric, where), cwd=where)
    path = MlflowFileRun(str(run)).read().file_path
    assert path == str(metric)  # the file written, not meta.yaml (written at start and end)
    watch = WriterWatch()
    watch.follow("t", path, "mlflow")
    watch.set_gpu_pids([pid])
    collector = WriterCollector(watch, scan_every_s=0)
    assert collector.sample().logs == ()  # a first look has no earlier write to compare
    before = metric.stat().st_mtime
    deadline = time.monotonic() + 10
    while metric.stat().st_mtime <= before:
        assert time.monotonic() < deadline, "the writer wrote nothing"
        time.sleep(0.01)
    assert collector.sample().logs == (LogWriters("t", (pid,), (pid,)),)

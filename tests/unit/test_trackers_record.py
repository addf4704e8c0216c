"""`gpuherd record --watch` on tracker stores written while it records: metrics.csv, findings."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from collectors.samples import LogBatch
from gpuherd.record.logsink import LogSink
from gpuherd.session.session import SessionWriter
from parsers.model import LogMetric

STORES = Path(__file__).resolve().parents[1] / "data" / "trackers"

TRAIN = """
import sqlite3, sys, time
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.summary import scalar

tb = EventsWriter(sys.argv[1] + "/lightning_logs/version_0/events")
db = sqlite3.connect(sys.argv[1] + "/mlflow.db")
db.execute("PRAGMA journal_mode = WAL")
uuid = db.execute("SELECT run_uuid FROM runs WHERE name = 'good-run'").fetchone()[0]
db.execute("UPDATE runs SET status = 'RUNNING' WHERE run_uuid = ?", (uuid,))
db.commit()
for step in range(4):
    loss = float("nan") if step == 3 else 1.0 / (1 + step)
    tb.write_event(Event(wall_time=1e9 + step, step=step, summary=scalar("train/loss", loss)))
    tb.flush()
    db.execute("INSERT INTO metrics VALUES ('train/loss', ?, ?, ?, ?, ?)",
               (0.0 if step == 3 else loss, 1_700_000_100_000 + step, uuid, 100 + step,
                int(step == 3)))
    db.commit()
    time.sleep(0.8)
db.execute("UPDATE runs SET status = 'FINISHED' WHERE run_uuid = ?", (uuid,))
db.commit()
time.sleep(1.5)
"""


def test_record_watch_puts_tracker_points_in_metrics_csv(tmp_path: Path) -> None:
    store = tmp_path / "work"
    (store / "lightning_logs" / "version_0").mkdir(parents=True)
    shutil.copy(STORES / "mlflow_sqlite" / "mlflow.db", store / "mlflow.db")
    session = tmp_path / "s"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(session),
            "--watch",
            str(store),
            "--",
            sys.executable,
            "-c",
            TRAIN,
            str(store),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    with open(session / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    tb_task = str(store / "lightning_logs" / "version_0")
    tb = [(r["step"], r["value"]) for r in rows if r["task"] == tb_task]
    assert tb == [("0", "1.0"), ("1", "0.5"), ("2", "0.33333334"), ("3", "nan")]  # float32
    assert {r["task"] for r in rows} == {tb_task, "demo/good-run", "demo/nan-run"}
    db_rows = [r for r in rows if r["task"].startswith("demo/")]  # named as MLflow names them
    good = {r["step"]: r["value"] for r in db_rows if int(r["step"]) >= 100}
    assert good == {"100": "1.0", "101": "0.5", "102": "0.3333333333333333", "103": "nan"}
    assert len(db_rows) == 2 * 24 + 4  # both runs of the copied store, and the new rows
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    nans = [e for e in events if e.get("kind") == "finding" and "nan" in json.dumps(e)]
    tasks_with_nan = {e["task"] for e in nans}
    assert tasks_with_nan == {tb_task, "demo/good-run", "demo/nan-run"}
    meta = json.loads((session / "meta.json").read_text())
    tasks = {t["task"]: t["path"] for t in meta["tasks"] if t["task"].startswith("demo/")}
    assert sorted(tasks) == ["demo/good-run", "demo/nan-run"]
    assert all(path.startswith(f"{store / 'mlflow.db'}#") for path in tasks.values())


def test_a_run_named_after_its_first_batches_is_written_under_its_name(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s")
    sink = LogSink({"command.log": "command"})
    row = (1, LogMetric((("train/loss", 0.5),), step=1))
    run = "wandb/offline-run-x"
    sink(writer, LogBatch(run, 1.0, "wandb", label="offline-run-x"))  # the run record not read
    sink(writer, LogBatch(run, 2.0, "wandb", metrics=(row,), label="demo/good-run"))
    sink(writer, LogBatch(run, 3.0, "wandb", metrics=(row,), label="demo/renamed"))
    sink(writer, LogBatch("command.log", 3.0, "generic", metrics=(row,), label="ignored"))
    writer.close()
    with open(tmp_path / "s" / "metrics.csv", newline="") as f:
        tasks = [r["task"] for r in csv.DictReader(f)]
    # one name a task: once rows are written under it, a later name does not split the task
    assert tasks == ["demo/good-run", "demo/good-run", "command"]
    assert [t["task"] for t in sink.tasks_meta()] == ["demo/good-run", "command"]

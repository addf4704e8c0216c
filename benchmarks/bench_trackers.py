"""CPU per new point read from a tracker's store, beside CPU per log line; listing a big store.

Usage: python benchmarks/bench_trackers.py [--points N] [--repeats R] [--runs 100]
       [--run-points 10000]

Per point: for each store a run of N points is written (a train loss at every step, a
validation accuracy every 10th), then read to its end by its collector
(`TrackerRunCollector.sample()` until no backlog: framing, decoding, naming, findings,
`LogBatch`), in this process. Beside it, in the same run, a log of N `step=12 loss=0.4567`
lines is read to its end by `LogTailCollector.sample()` (offsets, lines, detection, parser,
findings, `LogBatch`). Both are CPU seconds of this process, best of R repeats, each repeat
reading the log and then every store (so both meet the same load); the ratio is the
store's CPU per point over the log's CPU per line (goal: <= 1).

Listing: a store of `--runs` runs of `--run-points` points each, for TensorBoard (one event
file copied into each run directory), MLflow's file store and MLflow's SQLite store; the time
of `collectors.trackers.stores.find_runs` on its root and of one `--watch` discovery scan
(goal: < 1 s each).

Run it with the interpreter of the install to measure: an editable install reads with the
pure-Python modules, a wheel built with a C compiler with the compiled ones (`hatch_build.py`);
the first line says which.

The TensorBoard points are written with tensorboardX's file writer, the MLflow ones in MLflow's
layout (the file store's `<ms> <value> <step>` lines, rows in a copy of the committed
`mlflow.db`), so no MLflow is needed here. W&B is measured when wandb is installed, from the
history records of the committed run repeated, numbered on as wandb numbers its records.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

from collectors.logs.discovery import LogDiscovery  # noqa: E402
from collectors.logs.logtail import LogTailCollector  # noqa: E402
from collectors.trackers.collector import TrackerRunCollector  # noqa: E402
from collectors.trackers.stores import find_runs  # noqa: E402

STORES = ROOT / "tests" / "data" / "trackers"
T0 = 1_700_000_000.0


def loss(step: int) -> float:
    return round(2.5 / (1 + step * 1e-4), 4)


def write_log(path: Path, points: int) -> None:
    with path.open("w") as out:
        for step in range(points):
            out.write(f"step={step} loss={loss(step)}\n")


def write_tensorboard(run: Path, points: int) -> None:
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.summary import scalar

    run.mkdir(parents=True)
    writer = EventsWriter(str(run / "events"))
    for step in range(points):
        tag, value = (
            ("val/acc", 0.5 + step * 1e-5) if step % 10 == 9 else ("train/loss", loss(step))
        )
        writer.write_event(Event(wall_time=T0 + step, step=step, summary=scalar(tag, value)))
    writer.close()


def write_mlflow_files(run: Path, points: int) -> None:
    (run / "metrics" / "train").mkdir(parents=True)
    (run / "metrics" / "val").mkdir()
    (run / "meta.yaml").write_text(f"run_id: {run.name}\nrun_name: r\nstatus: 1\n")
    with (
        (run / "metrics" / "train" / "loss").open("w") as out,
        (run / "metrics" / "val" / "acc").open("w") as val,
    ):
        for step in range(points):
            if step % 10 == 9:
                val.write(f"{int((T0 + step) * 1000)} {0.5 + step * 1e-5} {step}\n")
            else:
                out.write(f"{int((T0 + step) * 1000)} {loss(step)} {step}\n")


def write_mlflow_db(path: Path, runs: int, points: int) -> list[str]:
    shutil.copy(STORES / "mlflow_sqlite" / "mlflow.db", path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    experiment = db.execute("SELECT experiment_id FROM experiments WHERE name = 'demo'").fetchone()[
        0
    ]
    uuids = []
    for index in range(runs):
        uuid = f"{index:032x}"
        uuids.append(uuid)
        db.execute(
            "INSERT INTO runs (run_uuid, name, status, lifecycle_stage, experiment_id, "
            "start_time) VALUES (?, ?, 'RUNNING', 'active', ?, ?)",
            (uuid, f"run-{index}", experiment, index),
        )
        db.executemany(
            "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, 0)",
            [
                (
                    "val/acc" if step % 10 == 9 else "train/loss",
                    loss(step),
                    int((T0 + step) * 1000),
                    uuid,
                    step,
                )
                for step in range(points)
            ],
        )
    db.commit()
    db.close()
    return uuids


def log_cpu(path: Path, size: int) -> tuple[float, int]:
    """(CPU s, lines with a metric) of reading the log to its end with a log tail."""
    collector = LogTailCollector(str(path), poll=True, poll_interval_s=0.0)
    began = time.process_time()
    collector.open()
    points = 0
    while True:
        batch = collector.sample()
        points += sum(len(m.values) for _n, m in batch.metrics)
        if batch.offset_bytes >= size:
            break
    cpu = time.process_time() - began
    collector.close()
    return cpu, points


def build() -> str:
    """Which build of the log parsers and the tracker readers this interpreter imports."""
    import importlib.machinery

    import parsers.text
    from collectors.trackers import wandb_wire

    def kind(module: object) -> str:
        path = getattr(module, "__file__", "") or ""
        return (
            "compiled" if path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) else "pure"
        )

    return f"log parsers: {kind(parsers.text)}, tracker readers: {kind(wandb_wire)}"


def per_point(work: Path, points: int, repeats: int) -> None:
    """Each repeat reads the log, then each store; the best of each is kept.

    Alternating keeps the log and the stores under the same load: a virtual machine's speed
    can drift by several per cent within a minute.
    """
    print(build())
    log = work / "train.log"
    write_log(log, points)
    stores = {
        "tensorboard": work / "tb" / "version_0",
        "mlflow file": work / "mlruns" / "0" / ("f" * 32),
    }
    write_tensorboard(stores["tensorboard"], points)
    write_mlflow_files(stores["mlflow file"], points)
    uuid = write_mlflow_db(work / "mlflow.db", 1, points)[0]
    stores["mlflow sqlite"] = Path(f"{work / 'mlflow.db'}#{uuid}")
    wandb_run = write_wandb(work / "wandb", points)
    if wandb_run is not None:
        stores["wandb"] = wandb_run
    size = log.stat().st_size
    log_runs: list[tuple[float, int]] = []
    store_runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in stores}
    for _ in range(repeats):
        log_runs.append(log_cpu(log, size))
        for name, task in stores.items():
            store_runs[name].append(store_cpu(str(task)))
    per_line = min(cpu for cpu, _lines in log_runs) / log_runs[0][1]
    print(f"log tail, {log_runs[0][1]:,} lines: {per_line * 1e6:.2f} us CPU per line")
    print("| store | points | values | us CPU per point | per log line | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, runs in store_runs.items():
        cpu, got, values = min(run[0] for run in runs), runs[0][1], runs[0][2]
        print(
            f"| {name} | {got:,} | {values:,} | {cpu / got * 1e6:.2f} | "
            f"{per_line * 1e6:.2f} | {cpu / got / per_line:.2f} |"
        )


def store_cpu(task: str) -> tuple[float, int, int]:
    """(CPU s, points, values) of reading a run to its end.

    A point is one metric of the batch: one scalar event, one MLflow row, one W&B history
    row (all the values logged at one step, as a log line holds several).
    """
    collector = TrackerRunCollector(task, poll_interval_s=0.0)
    began = time.process_time()
    collector.open()
    points = values = 0
    while True:
        batch = collector.sample()
        points += len(batch.metrics)
        values += sum(len(m.values) for _n, m in batch.metrics)
        if not collector.backlog:
            break
    cpu = time.process_time() - began
    collector.close()
    return cpu, points, values


def write_wandb(root: Path, points: int) -> Path | None:
    """A W&B run log of the committed run's history records repeated (wandb to decode them)."""
    try:
        from wandb.proto.wandb_internal_pb2 import Record  # noqa: F401
    except ImportError:
        print("wandb not installed: no W&B figure")
        return None
    from collectors.trackers.framing import WandbLogReader

    # the good run (the larger file): the NaN run would add a finding to most rows
    source = sorted((STORES / "wandb").glob("*/run-*.wandb"), key=lambda p: p.stat().st_size)[-1]
    records, _used = WandbLogReader().feed(source.read_bytes())
    history = [r for r in records if b"train/loss" in r and b"_step" in r]
    run = root / "offline-run-bench-x" / "run-x.wandb"
    run.parent.mkdir(parents=True)
    run.write_bytes(
        frame_records([numbered(history[i % len(history)], i + 1) for i in range(points)])
    )
    return run.parent


def numbered(record: bytes, num: int) -> bytes:
    """`record` as the `num`-th record of its run: wandb numbers each record it writes (a varint
    of one byte for the first 127, two up to 16,383, more beyond), as a long run's are."""
    from collectors.trackers.wire import read_varint, varint_bytes

    assert record[0] == 0x08  # `num`, field 1, a varint: first in wandb's records
    _old, rest = read_varint(record, 1)
    return b"\x08" + varint_bytes(num) + record[rest:]


def frame_records(records: list[bytes]) -> bytes:
    """A W&B log of these records, chunked across 32 KiB blocks as LevelDB's log writer does."""
    import struct
    import zlib

    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for body in records:
        first = True
        while True:
            left = 32768 - len(out) % 32768
            if left < 7:
                out += b"\0" * left
                continue
            piece, body = body[: left - 7], body[left - 7 :]
            kind = (1 if not body else 2) if first else (4 if not body else 3)
            crc = zlib.crc32(piece, zlib.crc32(bytes([kind])))
            out += struct.pack("<IHB", crc, len(piece), kind) + piece
            first = False
            if not body:
                break
    return bytes(out)


def listing(work: Path, runs: int, run_points: int) -> None:
    print(f"\nlisting a store of {runs} runs x {run_points:,} points")
    template = work / "template"
    write_tensorboard(template, run_points)
    event = next(template.iterdir())
    for index in range(runs):
        (work / "tb" / f"version_{index}").mkdir(parents=True)
        shutil.copy(event, work / "tb" / f"version_{index}" / event.name)
        write_mlflow_files(work / "mlruns" / "1" / f"{index:032x}", run_points)
    (work / "db").mkdir()
    write_mlflow_db(work / "db" / "mlflow.db", runs, run_points)
    print("| store | runs found | find_runs s | --watch scan s |")
    print("| --- | --- | --- | --- |")
    for name, root in (
        ("tensorboard", work / "tb"),
        ("mlflow file", work / "mlruns"),
        ("mlflow sqlite", work / "db"),
    ):
        began = time.perf_counter()
        found = find_runs(str(root))
        listed = time.perf_counter() - began
        began = time.perf_counter()
        scanned = LogDiscovery(watch=[str(root)]).scan()
        scan = time.perf_counter() - began
        print(f"| {name} | {len(found)} (scan {len(scanned)}) | {listed:.3f} | {scan:.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--run-points", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "points").mkdir()
        per_point(work / "points", args.points, args.repeats)
        (work / "list").mkdir()
        listing(work / "list", args.runs, args.run_points)
    return 0


if __name__ == "__main__":
    sys.exit(main())

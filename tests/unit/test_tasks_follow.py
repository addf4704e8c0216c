"""A real log followed by the real tail, folded into a TaskTracker."""

from __future__ import annotations

import os

from collectors.logs.logtail import LogTailCollector
from gpuherd.tasks import TaskTracker


def sample_all(tail, tracker):
    while True:
        tail.wake()
        tracker.add_batch(tail.sample())
        if not tail._more:
            return


def test_rewritten_lightning_csv_gives_each_row_once(tmp_path):
    log = tmp_path / "version_0" / "metrics.csv"
    log.parent.mkdir()
    rows = "".join(f"0,{s},{1 / (s + 1):.5f}\n" for s in range(0, 200, 10))
    log.write_text("epoch,step,train_loss\n" + rows)
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    tracker = TaskTracker()
    sample_all(tail, tracker)
    # Lightning rewrites the file when validation adds a column, then appends.
    more = "".join(f"0,{s},{1 / (s + 1):.5f},\n" for s in range(0, 200, 10))
    more += "".join(f"1,{s},{1 / (s + 1):.5f},0.5\n" for s in range(200, 300, 10))
    log.write_text("epoch,step,train_loss,val_loss\n" + more)
    sample_all(tail, tracker)
    tail.close()
    view = tracker.view(str(log))
    assert [x for x, _ in tracker.series(str(log), "train/loss")] == list(range(0, 300, 10))
    assert view.format == "lightning_csv" and view.generation == 2 and view.runs == 1
    assert dict(view.latest)["val/loss"] == 0.5 and view.step == 290


def test_rotated_log_counts_every_line_once(tmp_path):
    log = tmp_path / "train.log"
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    tracker = TaskTracker()
    step = 0
    for generation in range(4):
        with open(log, "a") as f:
            for _ in range(100):
                f.write(f"step={step} loss={1 / (step + 1):.5f}\n")
                step += 1
        sample_all(tail, tracker)
        os.rename(log, tmp_path / f"train.log.{generation}")
        sample_all(tail, tracker)
    with open(log, "a") as f:
        f.write(f"step={step} loss=0.001\n")
    sample_all(tail, tracker)
    tail.close()
    view = tracker.view(str(log))
    assert view.lines_read == 401 and view.step == 400 and view.generation == 5
    assert len(tracker.series(str(log), "train/loss")) == 401


SB3 = os.path.join(os.path.dirname(__file__), "..", "data")


def test_sb3_progress_csv_rewritten_after_its_first_dump_gives_each_row_once(tmp_path):
    # Real SB3 2.9.2 PPO output (tests/data/logs/make_logs/gen_sb3.py): the first dump has no
    # `train/` keys, so the second rewrites the whole file under a longer header.
    dumps = [os.path.join(SB3, "sb3_dumps", f"ppo_progress.csv.{n}") for n in (1, 2)]
    dumps.append(os.path.join(SB3, "logs", "sb3", "ppo_progress.csv"))
    log = tmp_path / "progress.csv"
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    tracker = TaskTracker()
    for dump in dumps:
        with open(dump, "rb") as source, open(log, "r+b" if log.exists() else "wb") as out:
            out.write(source.read())  # in place, from its start, as SB3's CSV writer does
        sample_all(tail, tracker)
    tail.close()
    steps = list(range(256, 2049, 256))
    assert [x for x, _ in tracker.series(str(log), "rollout/ep_rew_mean")] == steps
    assert [x for x, _ in tracker.series(str(log), "train/loss")] == steps[1:]
    latest = dict(tracker.view(str(log)).latest)
    assert latest["train/loss"] == 56.87999725341797 and latest["lr"] == 0.0003
    # counters and settings the table repeats are no measurements
    assert (
        not {"time/iterations", "time/time_elapsed", "train/n_updates", "train/clip_range"}
        & latest.keys()
    )
    assert tracker.view(str(log)).step == 2048

"""LogTailCollector driven sample by sample on real files (polling mode, no timing involved)."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest

from collectors.base import CollectorError, CollectorUnavailable
from collectors.logs.logtail import LogTailCollector
from tests.unit.test_logtail_harness import SpyFormats


def make(path, **kw):
    collector = LogTailCollector(str(path), poll=True, poll_interval_s=0.01, settle_s=0, **kw)
    collector.open()
    return collector


def drain(collector, limit=100):
    """Sample until a batch reads nothing new; return all batches."""
    batches = []
    for _ in range(limit):
        collector.wake()
        batch = collector.sample()
        batches.append(batch)
        if not batch.lines_read and not batch.metrics and not collector._more:
            return batches
    raise AssertionError("the tail never settled")


def steps(batches):
    return [m.step for b in batches for _, m in b.metrics]


def append(path, text, mode="a"):
    with open(path, mode + "b") as f:
        f.write(text.encode() if isinstance(text, str) else text)


def lines(start, stop):
    return "".join(f"step={i} loss={1 / (i + 1):.4f}\n" for i in range(start, stop))


def test_name_and_loop_interval(tmp_path):
    c = LogTailCollector(str(tmp_path / "a.log"))
    assert c.name == f"log:{tmp_path / 'a.log'}"
    assert c.interval_s == 0.0  # sample() does the waiting


def test_reads_existing_lines_then_appended_ones_with_line_numbers(tmp_path):
    log = tmp_path / "train.log"
    append(log, "starting\n" + lines(0, 5))
    c = make(log)
    first = drain(c)
    assert steps(first) == [0, 1, 2, 3, 4]
    assert [n for b in first for n, _ in b.metrics] == [2, 3, 4, 5, 6]
    assert sum(b.lines_read for b in first) == 6
    assert first[0].format == "generic" and first[0].generation == 1
    append(log, lines(5, 8))
    assert steps(drain(c)) == [5, 6, 7]
    c.close()


def test_partial_line_is_parsed_once_completed(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 1) + "step=1 loss=0.")
    c = make(log)
    assert steps(drain(c)) == [0]
    append(log, "25\n")
    [metric] = [m for b in drain(c) for _, m in b.metrics]
    assert metric.step == 1 and metric.values == (("train/loss", 0.25),)
    c.close()


def test_progress_bar_refreshes_are_one_line(tmp_path):
    log = tmp_path / "train.log"
    c = make(log)
    append(log, "")
    batches = drain(c)
    for chunk in range(30):  # 30 flushes of 100 refreshes each
        append(log, "".join(f"\rstep={chunk * 100 + i} loss=0.5" for i in range(100)))
        batches += drain(c)
    append(log, "\n" + lines(5000, 5001))
    batches += drain(c)
    assert sum(b.lines_read for b in batches) == 2
    bar = [(n, m.step) for b in batches for n, m in b.metrics if n == 1]
    assert len(bar) <= 31  # at most one update per read, never one per refresh
    assert bar[-1][1] == 2999  # the last state of the bar
    assert steps(batches)[-1] == 5000
    c.close()


def test_unparsable_values_are_counted(tmp_path):
    log = tmp_path / "console.log"
    append(
        log,
        "{'loss': '0.5', 'epoch': '1.0'}\n{'loss': 'abc', 'epoch': '1.5'}\n"
        "{'loss': '0.25', 'epoch': '2.0'}\n",
    )
    batches = drain(make(log))
    assert batches[0].format == "hf_trainer"
    assert [m.epoch for b in batches for _, m in b.metrics] == [1.0, 2.0]
    assert sum(b.unparsed_lines for b in batches) == 1


def test_findings_from_lines_and_metrics_carry_line_numbers(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 1) + "step=1 loss=nan\nRuntimeError: CUDA out of memory.\n")
    findings = [(n, f.kind) for b in drain(make(log)) for n, f in b.findings]
    assert findings == [(2, "nan"), (3, "oom")]


def test_backlog_is_read_in_bounded_batches_without_loss(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 20_000))
    c = make(log, read_budget_bytes=64 * 1024)
    batches = drain(c, limit=1000)
    assert steps(batches) == list(range(20_000))
    assert len(batches) > 5
    assert max(len(b.metrics) for b in batches) < 20_000
    c.close()


def test_rename_and_create_reads_the_old_file_to_its_end(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 100))
    c = make(log)
    got = drain(c)
    for round_ in range(1, 5):
        base = round_ * 200
        append(log, lines(base - 100, base))  # written to the old file, not yet read
        os.rename(log, tmp_path / f"train.log.{round_}")
        append(log, lines(base, base + 100))  # the new file
        got += drain(c)
    assert sorted(steps(got)) == list(range(900))
    assert len(steps(got)) == 900  # nothing counted twice
    rotated = [b for b in got if b.rotated]
    assert len(rotated) == 4 and all(b.metrics[0][0] == 1 for b in rotated if b.metrics)
    assert got[-1].generation == 5
    c.close()


def test_copytruncate_restarts_at_line_one(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 50))
    c = make(log)
    got = drain(c)
    shutil.copy(log, tmp_path / "train.log.1")
    with open(log, "r+b") as f:
        f.truncate(0)
    append(log, lines(50, 60))
    got += drain(c)
    assert steps(got) == list(range(60))
    restart = next(b for b in got if b.truncated)
    assert restart.generation == 2 and restart.metrics[0][0] == 1
    c.close()


def csv_rows(start, stop, with_val=False):
    return "".join(
        f"0,{i},{1 / (i + 1):.4f}" + (",0.5" if with_val else "") + "\n" for i in range(start, stop)
    )


def test_rewrite_that_outgrows_the_old_offset_is_noticed(tmp_path):
    log = tmp_path / "metrics.csv"
    append(log, "epoch,step,train_loss\n" + csv_rows(0, 3))
    c = make(log)
    got = drain(c)
    # Lightning's CSVLogger rewrites the whole file under a new header when a new key appears.
    append(log, "epoch,step,train_loss,val_loss\n" + csv_rows(0, 6, with_val=True), mode="w")
    got += drain(c)
    assert steps(got) == [0, 1, 2, 0, 1, 2, 3, 4, 5]
    assert [b.generation for b in got if b.truncated] == [2]
    assert "val/loss" in [m for b in got for _, m in b.metrics][-1].as_dict()
    c.close()


def test_delete_then_recreate(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 3) + "step=3 loss=0.1")  # unfinished last line
    c = make(log)
    got = drain(c)
    os.unlink(log)
    got += drain(c)
    assert got[-1].waiting
    assert steps(got) == [0, 1, 2, 3]  # the unfinished line counts when its file is gone
    append(log, lines(10, 12))
    got += drain(c)
    assert steps(got)[-2:] == [10, 11]
    assert [b.generation for b in got if b.recreated] == [2]
    c.close()


def test_waits_for_a_file_that_does_not_exist_yet(tmp_path):
    log = tmp_path / "later" / "train.log"
    c = make(log)
    batch = drain(c)[-1]
    assert batch.waiting and batch.generation == 0 and batch.size_bytes is None
    log.parent.mkdir()
    append(log, lines(0, 2))
    got = drain(c)
    assert steps(got) == [0, 1] and not got[-1].waiting
    c.close()


def test_directory_given_as_log_fails_clearly_and_recovers(tmp_path):
    log = tmp_path / "runs"
    log.mkdir()
    c = make(log)
    with pytest.raises(CollectorError, match="is a directory"):
        c.wake()
        c.sample()
    log.rmdir()
    append(log, lines(0, 1))
    assert steps(drain(c)) == [0]
    c.close()


def test_invalid_utf8_and_binary_garbage_do_not_stop_parsing(tmp_path):
    log = tmp_path / "train.log"
    garbage = bytes(range(256)) * 4000
    append(
        log, lines(0, 1).encode() + b"\xff\xfe bad \xc3\n" + garbage + b"\n" + lines(1, 3).encode()
    )
    batches = drain(make(log))
    assert steps(batches) == [0, 1, 2]


def test_fifty_megabyte_line_is_cut_with_bounded_memory(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 1))
    with open(log, "ab") as f:
        for _ in range(50):
            f.write(b"z" * (1024 * 1024))
    c = make(log, read_budget_bytes=4 * 1024 * 1024)
    got = []
    for _ in range(100):
        c.wake()
        got.append(c.sample())
        assert c.pending_bytes <= 64 * 1024
        if not c._more:
            break
    append(log, "\n" + lines(1, 2))
    got += drain(c)
    assert steps(got) == [0, 1]
    assert sum(b.too_long_lines for b in got) == 1
    assert sum(b.unparsed_lines for b in got) == 0  # its head is read: no metric, no error
    assert sum(b.lines_read for b in got) == 3
    c.close()


def test_format_is_detected_from_the_first_lines_and_again_after_rotation(tmp_path):
    log = tmp_path / "train.log"
    formats = SpyFormats()
    append(log, lines(0, 50))
    c = make(log, formats=formats)
    drain(c)
    assert [len(d) for d in formats.detected] == [50]  # at the end of the first read
    append(log, lines(50, 60))
    drain(c)
    assert [len(d) for d in formats.detected] == [50, 60]  # provisional: detected again
    append(log, lines(60, 300))
    drain(c)
    assert [len(d) for d in formats.detected] == [50, 60, 200]
    append(log, lines(300, 310))
    drain(c)
    assert len(formats.detected) == 3  # 200 lines seen: settled
    os.rename(log, tmp_path / "old.log")
    append(log, lines(500, 502))
    assert steps(drain(c)) == [500, 501]
    assert [len(d) for d in formats.detected] == [50, 60, 200, 2]
    c.close()


def test_banner_before_the_metric_lines_does_not_decide_the_format(tmp_path):
    log = tmp_path / "train.log"
    banner = "".join(f"(VERY_LOW    ) Hook{i}\n" for i in range(60))
    append(
        log,
        banner
        + "".join(
            f"2026-01-01 00:00:00,000 - mmseg - INFO - Iter [{i}/100]\tlr: 1.0e-02, loss: 0.5\n"
            for i in range(10, 60, 10)
        ),
    )
    got = drain(make(log))
    assert {b.format for b in got if b.metrics} == {"mmengine"}
    assert steps(got) == [10, 20, 30, 40, 50]


def test_forced_unknown_format_is_unavailable(tmp_path):
    c = LogTailCollector(str(tmp_path / "a.log"), format="nope")
    with pytest.raises(CollectorUnavailable, match="unknown log format 'nope'"):
        c.open()
    c.close()


def test_network_filesystem_is_polled(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"rootfs / ext4 rw 0 0\nserver:/x {tmp_path} nfs4 rw 0 0\n")
    c = LogTailCollector(str(tmp_path / "a.log"), mounts_path=str(mounts))
    c.open()
    assert c.polling
    c.close()


def trainer_state(n, nan_at=None):
    history = [
        {"loss": float("nan") if i == nan_at else 1.0 / (i + 1), "step": 10 * i} for i in range(n)
    ]
    return json.dumps({"global_step": 10 * n, "log_history": history})


def test_trainer_state_emits_only_new_history_entries(tmp_path):
    doc = tmp_path / "trainer_state.json"
    c = make(doc)
    assert drain(c)[-1].waiting
    doc.write_text(trainer_state(3))
    assert steps(drain(c)) == [0, 10, 20]
    doc.write_text(trainer_state(5, nan_at=4))
    got = drain(c)
    assert steps(got) == [30, 40]
    assert [(n, f.kind) for b in got for n, f in b.findings] == [(5, "nan")]
    assert math.isnan(got[0].metrics[-1][1].as_dict()["train/loss"])
    doc.write_text(trainer_state(1))  # a new run in the same directory
    got = drain(c)
    assert steps(got) == [0] and got[0].truncated and got[0].generation == 2
    c.close()


def test_half_written_document_is_retried_then_reported(tmp_path):
    doc = tmp_path / "trainer_state.json"
    doc.write_text(trainer_state(2)[:25])
    c = make(doc)
    c.wake()
    assert c.sample().metrics == ()  # not an error yet: the writer may be mid-write
    with pytest.raises(CollectorError, match="cannot parse"):
        for _ in range(3):
            c.wake()
            c.sample()
    doc.write_text(trainer_state(2))
    assert steps(drain(c)) == [0, 10]
    c.close()


def test_checkpoint_pattern_follows_the_newest_document(tmp_path):
    for n, step in ((2, 500), (4, 1000)):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        (ckpt / "trainer_state.json").write_text(trainer_state(n))
        os.utime(ckpt / "trainer_state.json", (step, step))
    c = make(tmp_path / "checkpoint-*" / "trainer_state.json")
    got = drain(c)
    assert steps(got) == [0, 10, 20, 30]
    assert got[0].file_path.endswith("checkpoint-1000/trainer_state.json")
    c.close()


H200_CONSOLE = os.path.dirname(__file__) + "/../data/logs/lightning_rich/h200_file.log"


def test_command_output_whose_first_lines_are_banners_switches_to_the_progress_format(tmp_path):
    # Lightning 2.6 on an H200, output to a file: banners and warnings as the run starts, the
    # Rich bar's final frame (spread over several lines) when it ends.
    with open(H200_CONSOLE, "rb") as f:
        data = f.read().splitlines(keepends=True)
    log = tmp_path / "command.log"
    append(log, b"".join(data[:21]), mode="w")
    c = make(log)
    first = drain(c)
    assert first[0].format == "generic"  # banners only so far: nothing specific to go by
    assert [m for b in first for m in b.metrics] == []  # and no junk from them
    append(log, b"".join(data[21:]))
    later = drain(c)
    c.close()
    metrics = [(n, m) for b in later for n, m in b.metrics]
    assert {b.format for b in later if b.metrics} == {"lightning_rich"}
    values = {name: value for _, m in metrics for name, value in m.values}
    assert values == {
        "throughput/it_s": 30.44,
        "eta_s": 0.0,
        "train/loss": 0.066,
        "train/acc": 1.0,
        "val/loss": 3.971,
        "val/acc": 0.309,
    }
    assert {m.epoch for _, m in metrics} == {5.0}


def test_a_generic_log_watches_for_a_progress_format_beyond_the_detection_sample(tmp_path):
    log = tmp_path / "command.log"
    banner = "".join(f"Loading shard {i} of 400: done\n" for i in range(400))
    append(log, banner)
    c = make(log)
    assert [m for b in drain(c) for m in b.metrics] == []
    append(log, "Epoch 0: 100%|██████████| 50/50 [00:01<00:00, 40.00it/s, loss=0.5]\n")
    got = drain(c)
    assert {b.format for b in got if b.metrics} == {"tqdm"}
    assert [dict(m.values)["train/loss"] for b in got for _, m in b.metrics] == [0.5]


def test_a_generic_log_with_metrics_keeps_its_format(tmp_path):
    log = tmp_path / "train.log"
    append(log, lines(0, 300))
    c = make(log)
    drain(c)
    append(log, "Epoch 0: 100%|██████████| 50/50 [00:01<00:00, 40.00it/s, loss=0.5]\n")
    append(log, lines(300, 302))
    got = drain(c)
    assert {b.format for b in got} == {"generic"}  # a bar among metric lines changes nothing
    assert steps(got) == [None, 300, 301]

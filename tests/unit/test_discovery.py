from __future__ import annotations

import os

from collectors.logs.discovery import DiscoveryCollector, LogDiscovery, run_file_kind


def touch(path, text="x\n", mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return str(path)


def ids(logs):
    return [log.task_id for log in logs]


def test_run_file_kinds():
    assert run_file_kind("/r/lightning_logs/version_3/metrics.csv") == "lightning_csv"
    assert run_file_kind("/r/out/trainer_state.json") == "trainer_state"
    assert run_file_kind("/r/work_dirs/x/20240101/vis_data/scalars.json") == "mmengine_json"
    assert run_file_kind("/r/train.log") == "log"
    assert run_file_kind("/r/metrics.jsonl") == "jsonl"
    assert run_file_kind("/r/metrics.csv") is None
    assert run_file_kind("/r/notes.txt") is None


def test_watch_finds_run_files_and_skips_noise(tmp_path):
    lightning = touch(tmp_path / "lightning_logs" / "version_0" / "metrics.csv")
    hf = touch(tmp_path / "hf_out" / "trainer_state.json")
    log = touch(tmp_path / "exp1" / "train.log")
    jsonl = touch(tmp_path / "exp1" / "metrics.jsonl")
    touch(tmp_path / ".git" / "logs" / "HEAD.log")
    touch(tmp_path / "node_modules" / "pkg" / "npm.log")
    touch(tmp_path / "wandb" / "debug.log")
    touch(tmp_path / "exp1" / "config.yaml")
    touch(tmp_path / "a" / "b" / "c" / "d" / "e" / "f" / "g" / "deep.log")
    logs = LogDiscovery(watch=[str(tmp_path)], max_depth=4).scan()
    assert sorted(ids(logs)) == sorted([lightning, hf, log, jsonl])
    kinds = {log.task_id: log.kind for log in logs}
    assert kinds[lightning] == "lightning_csv" and kinds[hf] == "trainer_state"
    assert all(log.source == str(tmp_path) for log in logs)


def test_checkpoints_become_one_task_following_the_newest(tmp_path):
    for step in (500, 1000, 1500):
        touch(tmp_path / "out" / f"checkpoint-{step}" / "trainer_state.json")
    [log] = LogDiscovery(watch=[str(tmp_path)]).scan()
    assert log.task_id == str(tmp_path / "out" / "checkpoint-*" / "trainer_state.json")


def test_log_arguments_plain_missing_and_globbed(tmp_path):
    later = str(tmp_path / "later.log")
    pattern = str(tmp_path / "runs" / "*.log")
    discovery = LogDiscovery(logs=[later, pattern])
    assert ids(discovery.scan()) == [later]  # a missing plain path is waited for
    a = touch(tmp_path / "runs" / "a.log")
    assert ids(discovery.scan()) == [later, a]
    b = touch(tmp_path / "runs" / "b.log")
    assert ids(discovery.scan()) == [later, a, b]  # the glob is expanded again


def test_relative_log_argument_becomes_a_stable_absolute_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "train.log")
    [given] = LogDiscovery(logs=["train.log"], watch=[str(tmp_path)]).scan()
    assert given.task_id == str(tmp_path / "train.log") and given.kind == "given"


def test_age_limit_and_entry_limit(tmp_path):
    old = touch(tmp_path / "old.log", mtime=1_000)
    new = touch(tmp_path / "new.log", mtime=1_000_000)
    aged = LogDiscovery(watch=[str(tmp_path)], max_age_s=3600, clock=lambda: 1_000_100)
    assert ids(aged.scan()) == [new]
    assert old not in ids(aged.scan())
    for i in range(30):
        touch(tmp_path / f"n{i:02}.txt")
    limited = LogDiscovery(watch=[str(tmp_path)], max_entries=10)
    limited.scan()
    assert limited.incomplete


def test_collector_reports_new_and_removed_runs(tmp_path):
    first = touch(tmp_path / "lightning_logs" / "version_0" / "metrics.csv")
    collector = DiscoveryCollector(LogDiscovery(watch=[str(tmp_path)]), interval_s=0)
    collector.open()
    one = collector.sample()
    assert ids(one.added) == [first] and one.removed == ()
    second = touch(tmp_path / "lightning_logs" / "version_1" / "metrics.csv")
    two = collector.sample()
    assert ids(two.added) == [second] and ids(two.logs) == [first, second]
    os.unlink(first)
    three = collector.sample()
    assert three.added == () and three.removed == (first,)
    collector.close()


def test_directory_symlink_loops_are_not_followed(tmp_path):
    touch(tmp_path / "run" / "train.log")
    os.symlink(tmp_path, tmp_path / "run" / "loop")
    assert ids(LogDiscovery(watch=[str(tmp_path)], max_depth=10).scan()) == [
        str(tmp_path / "run" / "train.log")
    ]


def test_collector_stretches_its_interval_when_a_scan_is_slow(tmp_path):
    readings = iter([0.0, 0.001, 10.0, 10.5])  # a 1 ms scan, then a 500 ms one
    collector = DiscoveryCollector(
        LogDiscovery(watch=[str(tmp_path)]),
        interval_s=2.0,
        max_busy=0.01,
        timer=lambda: next(readings),
    )
    collector.sample()
    assert collector.interval_s == 2.0
    collector.sample()
    assert collector.interval_s == 50.0  # 0.5 s of scanning at most 1 % of the time


def test_excluded_directories_are_neither_walked_nor_globbed(tmp_path):
    session = tmp_path / "session"
    touch(session / "events.jsonl")
    touch(session / "command.log")
    run = touch(tmp_path / "run" / "train.log")
    discovery = LogDiscovery(
        logs=[str(tmp_path / "*" / "*.log")], watch=[str(tmp_path)], exclude=[str(session)]
    )
    assert ids(discovery.scan()) == [run]

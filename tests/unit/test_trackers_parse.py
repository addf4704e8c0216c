"""`gpuherd parse` on the trackers' own stores, written by the real libraries."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from gpuherd.cli import main

STORES = Path(__file__).resolve().parents[1] / "data" / "trackers"
HAS_WANDB = importlib.util.find_spec("wandb") is not None
GOOD_LOSS, GOOD_ACC, NAN_STEP, LOSS_BEFORE_NAN = 0.1, 0.88, 12, 0.1667


def _records(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict]:
    assert main(["parse", "--json", str(path)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _by_run(records: list[dict]) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for record in records:
        runs.setdefault(record["run"], []).append(record)
    return runs


def _last(records: list[dict], metric: str) -> tuple[int, float]:
    points = [(r["step"], r["value"]) for r in records if r.get("metric") == metric]
    return points[-1]


def _check_good(records: list[dict]) -> None:
    assert _last(records, "train/loss") == (19, GOOD_LOSS)
    assert _last(records, "val/acc") == (19, GOOD_ACC)
    steps = [r["step"] for r in records if r.get("metric") == "val/acc"]
    assert steps == [4, 9, 14, 19]
    assert not [r for r in records if r.get("finding") == "nan"]


def _check_nan(records: list[dict]) -> None:
    losses = {r["step"]: r["value"] for r in records if r.get("metric") == "train/loss"}
    assert losses[NAN_STEP - 1] == LOSS_BEFORE_NAN and losses[NAN_STEP] == "nan"
    nans = [r for r in records if r.get("finding") == "nan"]
    assert nans[0]["evidence"] == f"train/loss = nan at step {NAN_STEP}"
    point = next(r for r in records if r.get("step") == NAN_STEP and r.get("metric"))
    assert nans[0]["line"] == point["line"]  # the finding sits at the NaN point


@pytest.mark.parametrize(
    ("store", "good", "bad"),
    [
        ("tensorboardx/lightning_logs", "lightning_logs/version_0", "lightning_logs/version_1"),
        ("tensorboard_summary", "tensorboard_summary/good", "tensorboard_summary/nan"),
        ("mlflow_file/mlruns", "demo/good-run", "demo/nan-run"),
        ("mlflow_sqlite/mlflow.db", "demo/good-run", "demo/nan-run"),
    ],
)
def test_every_run_of_a_store_with_its_last_values_and_nan_step(
    capsys: pytest.CaptureFixture[str], store: str, good: str, bad: str
) -> None:
    runs = _by_run(_records(capsys, STORES / store))
    assert sorted(runs) == sorted([good, bad])
    _check_good(runs[good])
    _check_nan(runs[bad])
    assert len([r for r in runs[good] if "metric" in r]) == 24  # 20 losses, 4 accuracies


def test_tensor_encoded_scalars_read_as_simple_values(capsys: pytest.CaptureFixture[str]) -> None:
    """`tensorboard.summary` writes 0-d tensors, tensorboardX `simple_value`: same points."""

    def points(path: Path) -> list[tuple]:
        return [
            (r["step"], r["metric"], r["value"], r["taken_at"])
            for r in _records(capsys, path)
            if "metric" in r
        ]

    tensors = points(STORES / "tensorboard_summary" / "nan")
    simple = points(STORES / "tensorboardx" / "lightning_logs" / "version_1")
    assert tensors == simple and len(tensors) == 24


def test_a_single_run_directory_and_an_event_file(capsys: pytest.CaptureFixture[str]) -> None:
    run = STORES / "tensorboardx" / "lightning_logs" / "version_0"
    by_dir = _records(capsys, run)
    by_file = _records(capsys, next(run.glob("events.out.tfevents.*")))
    assert by_dir == by_file and {r["file"] for r in by_dir} == {str(run)}


def test_mlflow_status_and_names_from_the_stores(capsys: pytest.CaptureFixture[str]) -> None:
    from collectors.trackers.collector import TrackerRunCollector
    from collectors.trackers.stores import find_runs

    for store in ("mlflow_file/mlruns", "mlflow_sqlite/mlflow.db"):
        found = {}
        for run in find_runs(str(STORES / store)):
            collector = TrackerRunCollector(run.task_id)
            collector.open()
            batch = collector.sample()
            collector.close()
            found[batch.label] = batch.ended_with
        assert found == {"demo/good-run": 0, "demo/nan-run": 1}  # FINISHED, FAILED


def test_the_database_is_not_changed_by_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "mlflow.db"
    shutil.copy(STORES / "mlflow_sqlite" / "mlflow.db", db)
    db.chmod(0o444)
    before = db.read_bytes()
    runs = _by_run(_records(capsys, db))
    assert sorted(runs) == ["demo/good-run", "demo/nan-run"]
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


@pytest.mark.skipif(not HAS_WANDB, reason="wandb (the gpuherd[wandb] extra) is not installed")
def test_wandb_offline_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runs = _by_run(_records(capsys, STORES / "wandb"))
    assert sorted(runs) == ["demo/good-run", "demo/nan-run"]
    _check_good(runs["demo/good-run"])
    _check_nan(runs["demo/nan-run"])


def test_wandb_without_its_package_says_what_to_install_and_reads_the_console(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from collectors.trackers import wandb_run

    monkeypatch.setattr(wandb_run, "load_record_class", lambda: None)
    run = next((STORES / "wandb").glob("offline-run-*"))
    assert main(["parse", "--json", str(run)]) == 0
    captured = capsys.readouterr()
    assert "install 'gpuherd[wandb]'" in captured.err and captured.err.count("\n") == 1
    losses = [json.loads(line) for line in captured.out.splitlines()]
    console = [r for r in losses if r.get("metric") == "train/loss"]
    assert len(console) == 20  # `step N loss X` lines of files/output.log


def test_a_directory_without_runs_is_still_no_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("nothing\n")
    assert main(["parse", str(tmp_path)]) == 1
    assert "is a directory, not a log file" in capsys.readouterr().err


def test_wandb_summary_read_without_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collectors.trackers import wandb_run
    from collectors.trackers.collector import TrackerRunCollector

    monkeypatch.setattr(wandb_run, "load_record_class", lambda: None)
    run = tmp_path / "wandb" / "offline-run-x"
    shutil.copytree(next((STORES / "wandb").glob("offline-run-*")), run)
    (run / "files" / "wandb-summary.json").write_text(
        json.dumps(
            {
                "train/loss": 0.1,
                "val/acc": 0.88,
                "_step": 19,
                "_runtime": 3.5,
                "media": {"_type": "image-file"},
            }
        )
    )
    collector = TrackerRunCollector(str(run), poll_interval_s=0.0)
    collector.open()
    summaries = [m for _n, m in collector.sample().metrics if m.step == 19 and len(m.values) == 2]
    assert [m.values for m in summaries] == [(("train/loss", 0.1), ("val/acc", 0.88))]
    assert collector.sample().metrics == ()  # unchanged: not given again

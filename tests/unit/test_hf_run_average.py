"""Hugging Face's end-of-run `train_loss` is the run's average, never its last training loss."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from gpuherd.note.note import compose
from gpuherd.summary.summary import summarize
from parsers.hf_trainer import parse_hf_trainer_line, read_trainer_state
from parsers.model import LogMetric

CONSOLE = Path(__file__).resolve().parents[1] / "data/logs/hf_trainer/console.log"
END = (
    "{'train_runtime': '0.2757', 'train_samples_per_second': '696.5', "
    "'train_steps_per_second': '87.06', 'train_loss': '3.87', 'epoch': '3'}"
)


def test_the_end_of_run_dict_reports_the_average_under_its_own_name() -> None:
    assert parse_hf_trainer_line(END) == LogMetric(
        (
            ("train_runtime", 0.2757),
            ("throughput/samples_s", 696.5),
            ("throughput/it_s", 87.06),
            ("train/loss_run_mean", 3.87),
        ),
        None,
        3.0,
    )
    # a step's dict keeps its loss
    assert parse_hf_trainer_line("{'loss': '3.831', 'epoch': '3'}") == LogMetric(
        (("train/loss", 3.831),), None, 3.0
    )


def test_the_trainer_states_last_entry_too() -> None:
    state = {
        "log_history": [
            {"loss": 0.405, "step": 20, "epoch": 2.0},
            {
                "train_runtime": 12.5,
                "train_loss": 0.812,
                "total_flos": 1e12,
                "step": 20,
                "epoch": 2.0,
            },
        ]
    }
    metrics, unparsed = read_trainer_state(json.dumps(state))
    assert unparsed == []
    assert [m.as_dict().get("train/loss") for m in metrics] == [0.405, None]
    assert metrics[1].as_dict()["train/loss_run_mean"] == 0.812


def test_the_summary_and_the_note_end_on_the_last_steps_loss(tmp_path: Path) -> None:
    # The real console of a Trainer run, recorded as the output of a command: its step losses
    # go 3.896 ... 3.831, and the last line reports the run's average, 3.87.
    root = tmp_path / "s"
    script = "import sys; sys.stdout.write(open(sys.argv[1]).read())"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(root),
            "--",
            sys.executable,
            "-c",
            script,
            str(CONSOLE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "task command: train/loss 3.896 -> 3.831;" in out.stderr
    with open(root / "metrics.csv", newline="") as f:
        rows = [(r["metric"], float(r["value"])) for r in csv.DictReader(f)]
    assert ("train/loss_run_mean", 3.87) in rows
    assert [v for n, v in rows if n == "train/loss"][-1] == 3.831
    note = compose(summarize(root)).text
    assert "loss 3.9 -> 3.83," in note


def test_only_the_end_of_run_dict_is_renamed_when_redraws_run_together() -> None:
    """A line holding a step dict and the end-of-run dict: the step's loss stays the loss."""
    from parsers.registry import make_parser

    line = (
        "{'loss': 0.08, 'epoch': 1.0, 'step': 268}"
        "{'train_runtime': 158.4, 'train_loss': 0.0575, 'epoch': 2.0}"
    )
    metric = make_parser("hf_trainer").feed(line)
    assert metric is not None
    assert ("train/loss", 0.08) in metric.values
    assert ("train/loss_run_mean", 0.0575) in metric.values


def test_the_train_metrics_block_gives_the_run_average() -> None:
    """`***** train metrics *****` (`trainer.log_metrics`) repeats the run's average loss."""
    from parsers.registry import make_parser

    parser = make_parser("hf_trainer")
    assert parser.feed("***** train metrics *****") is None
    metric = parser.feed("  train_loss               =     0.0575")
    assert metric is not None and metric.values == (("train/loss_run_mean", 0.0575),)
    parser.feed("Evaluation done")
    after = parser.feed("train_loss: 0.5")
    assert after is not None and after.values == (("train/loss", 0.5),)


def test_a_trainer_banner_with_a_logging_prefix_gives_no_step() -> None:
    """`[INFO|trainer.py:2527] ... Total optimization steps = 170` is no metric and no step."""
    from parsers.registry import make_parser

    parser = make_parser("hf_trainer")
    line = "[INFO|trainer.py:2527] 2025-12-30 19:57:56,487 >>   Total optimization steps = 170"
    assert parser.feed(line) is None

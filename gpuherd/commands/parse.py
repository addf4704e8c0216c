"""`gpuherd parse FILE... [--format NAME] [--json]`: metrics and findings in training logs."""

from __future__ import annotations

import argparse

from gpuherd.common.options import ParseOptions, from_namespace

HELP = "print the metrics and health findings found in training-log files"
FORMAT_NAMES = (
    "tensorboard_csv",
    "mlflow",
    "lightning_csv",
    "timm_csv",
    "ultralytics_csv",
    "csv",
    "detr_json",
    "llamafactory",
    "detectron2_json",
    "mmengine_json",
    "jsonl",
    "mmengine",
    "detectron2",
    "sb3",
    "ultralytics",
    "lightning_rich",
    "keras",
    "nanogpt",
    "megatron",
    "fairseq",
    "paddle",
    "metric_logger",
    "hf_trainer",
    "tqdm",
    "generic",
    "hf_trainer_state",
    "json_document",
)
"""`parsers.registry.FORMAT_NAMES`, written out: importing the registry to print `--help` would
cost every command's start-up; a test keeps the two equal."""
EPILOG = (
    "FILE is a training log (plain text, CSV, JSON lines, a trainer_state.json, a "
    "TensorBoard CSV export or an MLflow metric file, named by its path); its "
    "format is detected from its first lines' text (then its name) unless --format names it "
    "(docs/parsers.md). FILE may also be a tracker's store: a TensorBoard run directory "
    "or event file, an mlruns/ directory, an mlflow.db, a W&B run directory or any "
    "directory holding such runs; every run in it is printed (docs/trackers.md).\n"
    f"--format names: {', '.join(FORMAT_NAMES)}."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The parser command's flags."""
    parser.add_argument("files", nargs="+", metavar="FILE", help="the log files to read")
    parser.add_argument(
        "--format",
        dest="log_format",
        default=None,
        metavar="NAME",
        help="force a log format instead of detecting it (names below)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def options(args: argparse.Namespace) -> ParseOptions:
    """The typed options this command hands the engine."""
    return from_namespace(ParseOptions, args)


def run(args: argparse.Namespace) -> int:
    """Parse the files."""
    from gpuherd.parse import parse_command

    return parse_command.run(options(args))

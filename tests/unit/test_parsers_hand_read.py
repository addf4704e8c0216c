"""Values read off every golden log by eye, so the golden files are not the code's word alone.

`test_parsers_golden.py` compares each log's parse with a committed `.expected.json`, which the
code itself wrote (`GPUHERD_UPDATE_GOLDEN=1`): a wrong number written once stays "expected".
This table was written by reading each log in a text viewer: the line number, what the line
says, in the name `parsers.text.metric_name` gives it (docs/parsers.md), and every line a finding
is due on. It is checked against the same parse, so the golden file can only change where these
readings still hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from parsers.registry import detect_format
from tests.unit.test_parsers_golden import DATA, LOGS, _sample, parse_whole


@dataclass(frozen=True)
class Read:
    """One value on one line, as the log prints it; `step`/`epoch` only where it says so."""

    line: int
    name: str
    value: float
    step: int | None = None
    epoch: float | None = None


@dataclass(frozen=True)
class Log:
    format: str | None
    """The format the log is in, where that is plain from the log; `None` when not asserted."""
    values: tuple[Read, ...]
    findings: frozenset[tuple[int, str]] = field(default_factory=frozenset)
    """Every (line, kind) finding due in the whole file."""
    unparsed: tuple[int, ...] = ()
    """Lines that look like metrics but hold a value that is no number."""


NAN, INF = math.nan, math.inf

HAND_READ: dict[str, Log] = {
    "detectron2/console.log": Log(
        "detectron2",
        (
            Read(1, "train/loss", 1.943, step=19),
            Read(1, "loss_cls", 1.788),
            Read(1, "lr", 0.02),
            Read(1, "throughput/it_s", 1 / 0.0105),
            Read(6, "train/loss", 1.669, step=59),
            Read(6, "loss_box_reg", 0.092),
            Read(2, "train/loss", 1.782, step=39),
            Read(2, "loss_cls", 1.668),
            Read(5, "val/map", 0.0),
            Read(5, "val/map_50", 0.0),
            Read(5, "bbox/APs", NAN),
        ),
    ),
    "detectron2_json/metrics.json": Log(
        "detectron2_json",
        (
            Read(1, "train/loss", 1.942512571811676, step=19),
            Read(1, "loss_cls", 1.787947654724121),
            Read(1, "eta_s", 0.4231187904983108),
            Read(3, "val/map", 0.0, step=59),
            Read(3, "val/map_50", 0.0),
            Read(3, "train/loss", 1.6689250469207764),
            Read(2, "train/loss", 1.7822765707969666, step=39),
            Read(2, "lr", 0.02),
            Read(3, "bbox/APs", NAN, step=59),
        ),
    ),
    "failures/cpu_oom.log": Log(None, (), frozenset({(1, "traceback"), (6, "oom")})),
    "failures/download.log": Log(
        None, (), frozenset({(1, "download"), (2, "traceback"), (28, "traceback")})
    ),
    "fairseq/roberta_race.log": Log(
        "fairseq",
        (
            Read(1, "train/loss", 0.158, step=27301, epoch=5),
            Read(1, "train/acc", 0.96072),
            Read(1, "lr", 1e-05),
            Read(1, "grad_norm", 25.694),
            Read(1, "throughput/tokens_s", 770.0),
            Read(2, "val/loss", 1.066, step=27301, epoch=5),
            Read(2, "val/acc", 0.833231),
            Read(2, "val/nll_loss", 0.003),
        ),
    ),
    "generic/train.log": Log(
        "generic",
        (
            Read(1, "train/loss", 1.1545, step=5),
            Read(1, "lr", 0.05),
            Read(1, "grad_norm", 0.606),
            Read(3, "val/loss", 1.2023, epoch=1),
            Read(3, "val/acc", 60.0),
            Read(3, "throughput/tokens_s", 123456.0),
            Read(7, "lr", 1e12, step=25),
            Read(8, "train/loss", NAN, step=30),
            Read(9, "val/loss", NAN, epoch=3),
            Read(9, "throughput/tokens_s", 370368.0),
        ),
        frozenset({(8, "nan"), (9, "nan")}),
    ),
    "generic/ugly.log": Log(
        "generic",
        (
            Read(1, "train/loss", 1.1545, step=5),
            Read(1, "grad_norm", 0.606),
            Read(4, "train/loss", -INF, step=40),
            Read(4, "lr", 1e-5),
            Read(4, "throughput/tokens_s", 1234.5),
            Read(4, "grad_norm", NAN),
            Read(6, "train/loss", 0.4, step=44),
            Read(8, "train/loss", 0.2, step=98),
            Read(9, "train/loss", 1.0606, step=20),
        ),
        frozenset({(4, "inf")}),
        unparsed=(3,),
    ),
    "handwritten/cifar10_tutorial.log": Log(
        "generic",
        (
            Read(3, "train/loss", 2.127, step=2000, epoch=1),
            Read(8, "train/loss", 1.455, step=12000, epoch=1),
            Read(9, "train/loss", 1.386, step=2000, epoch=2),
            Read(14, "train/loss", 1.275, step=12000, epoch=2),
        ),
    ),
    "handwritten/mnist_style_tqdm.log": Log(
        "tqdm",
        (
            Read(2, "train/loss", 1.2729),  # its `Accuracy=38.67` (percent) is left out
            Read(2, "throughput/it_s", 2.06),
            Read(3, "val/loss", 0.0027),
            Read(3, "val/acc", 0.5211),
            Read(19, "val/loss", 0.0015),
            Read(19, "val/acc", 0.7604),
        ),
    ),
    "handwritten/word_language_model.log": Log(
        "generic",
        (
            Read(4, "train/loss", 7.64, step=200, epoch=1),
            Read(4, "lr", 20.0),
            Read(4, "train/ppl", 2081.53),
            Read(4, "throughput/it_s", 1000 / 275.91),
            Read(19, "val/loss", 5.56, epoch=1),
            Read(19, "val/ppl", 259.02),
            Read(26, "train/loss", 5.33, step=1200, epoch=2),
            Read(26, "train/ppl", 206.82),
        ),
    ),
    "hf_trainer/console.log": Log(
        "hf_trainer",
        (
            Read(4, "train/loss", 3.896, epoch=0.375),
            Read(4, "grad_norm", 0.6046),
            Read(4, "lr", 0.004583),
            Read(6, "val/loss", 3.91, epoch=1),
            Read(15, "train/loss", 3.831, epoch=3),
            Read(15, "lr", 0.0002083),
            Read(18, "throughput/samples_s", 696.5),
            Read(18, "throughput/it_s", 87.06),
            Read(18, "train/loss_run_mean", 3.87),
        ),
    ),  # the run average, not a step
    "hf_trainer/import_error.log": Log(None, (), frozenset({(3, "traceback")})),
    "hf_trainer/with_tqdm.log": Log(
        None,
        (
            Read(4, "train/loss", 3.896, epoch=0.375),
            Read(8, "val/loss", 3.91, epoch=1),
            Read(25, "train/loss", 3.831, epoch=3),
            Read(28, "val/loss", 3.936, epoch=3),
            Read(33, "throughput/samples_s", 482.6),
            Read(9, "throughput/it_s", 79.73, step=8),
            Read(10, "eval/throughput/it_s", 684.95),
        ),
    ),
    "hf_trainer/seq_label.log": Log(
        "hf_trainer",
        (
            Read(11, "train/loss", 0.08, epoch=1.0),
            Read(11, "grad_norm", 0.43012261390686035),
            Read(11, "lr", 2.5e-05),
            Read(14, "val/loss", 0.04710279777646065, epoch=1.0),
            Read(14, "val/acc", 0.9862039316840583),
            Read(14, "eval_f1", 0.6629303442754203),
            Read(15, "throughput/it_s", 3.83, step=436),
            Read(15, "eta_s", 26.0),
            Read(16, "train/loss", 0.0351, epoch=2.0),
            Read(19, "val/loss", 0.047243136912584305, epoch=2.0),
            Read(20, "train/loss_run_mean", 0.05750848997884722, epoch=2.0),
            Read(20, "throughput/samples_s", 108.184),
            Read(21, "throughput/it_s", 3.38, step=536),
            Read(21, "eta_s", 0.0),
            Read(34, "eval/throughput/it_s", 35.57),
        ),
    ),
    "hf_trainer/thai2transformers_ner.log": Log(
        "hf_trainer",
        (
            Read(1, "train/loss", 0.18838241577148437, epoch=0.943396226),
            Read(2, "throughput/it_s", 3.64, step=150),
            Read(2, "eta_s", 233.0),
            Read(14, "val/loss", 0.10173556208610535, epoch=1.5723270440251573),
            Read(15, "train/loss", 0.10812286376953124),
            Read(26, "val/loss", 0.08590535074472427),
            Read(35, "train/loss", 0.05275115966796875, epoch=3.7735849),
            Read(35, "lr", 2.2222222222222223e-05),
            Read(36, "train/loss", 0.05139984130859375, epoch=4.08805031),
            Read(37, "train/loss", 0.0428802490234375, epoch=4.40251572327044),
            Read(45, "train/loss", 0.037841796875, epoch=5.031446540880503),
            Read(49, "throughput/it_s", 4.36, step=999),
            Read(49, "eta_s", 0.0),
        ),
    ),
    "hf_trainer_state/trainer_state.json": Log(
        "hf_trainer_state",
        (
            Read(1, "train/loss", 3.8958333333333335, step=3, epoch=0.375),
            Read(1, "lr", 0.004583333333333333),
            Read(1, "grad_norm", 0.6046097874641418),
            Read(3, "val/loss", 3.910339832305908, step=8, epoch=1.0),
            Read(6, "train/loss", 3.875020980834961, step=15, epoch=1.875),
            Read(7, "val/loss", 3.9369664192199707, step=16, epoch=2.0),
            Read(11, "val/loss", 3.936027765274048, step=24, epoch=3.0),
        ),
    ),
    "jsonl/train.jsonl": Log(
        "jsonl",
        (
            Read(1, "train/loss", 1.2714178562164307, step=1),
            Read(1, "lr", 0.05),
            Read(25, "lr", 1e12, step=25),
            Read(26, "train/loss", 7.176657143000725e21),
            Read(27, "train/loss", INF, step=27),
            Read(30, "train/loss", NAN, step=30),
        ),
        frozenset({(27, "inf"), (28, "nan"), (29, "nan"), (30, "nan")}),
    ),
    "keras2/lr_scheduler.log": Log(
        "keras",
        (
            Read(4, "lr", 0.003, epoch=1),
            Read(5, "throughput/samples_s", 1 / 195e-6, epoch=1),
            Read(5, "train/loss", 0.2537),
            Read(5, "train/acc", 0.9194),
            Read(5, "val/loss", 0.0578),
            Read(5, "val/acc", 0.9816),
            Read(8, "lr", 0.0022744503, epoch=2),
            Read(17, "train/loss", 0.0465, epoch=4),
            Read(17, "val/loss", 0.0262),
        ),
    ),
    "keras/verbose1_file.log": Log(
        "keras",
        (
            Read(2, "train/acc", 0.6589),
            Read(2, "train/loss", 0.6067),
            Read(2, "val/acc", 0.7422),
            Read(2, "val/loss", 0.5515),
            Read(4, "train/acc", 0.8568),
            Read(4, "val/loss", 0.4157),
            Read(6, "val/loss", 0.3010),
        ),
    ),
    "keras/verbose1_tty.log": Log(
        "keras",
        (
            Read(2, "train/acc", 0.5885),
            Read(2, "train/loss", 0.6789),
            Read(2, "val/acc", 0.6953),
            Read(2, "val/loss", 0.5793),
            Read(6, "val/acc", 0.9297),
        ),
    ),
    "keras/verbose2.log": Log(
        "keras",
        (
            Read(2, "train/acc", 0.5234),
            Read(2, "train/loss", 0.7694),
            Read(2, "val/acc", 0.7031),
            Read(2, "val/loss", 0.6077),
            Read(2, "throughput/it_s", 200.0),
            Read(6, "val/loss", 0.2951),
        ),
    ),
    "lightning_csv/metrics.csv": Log(
        "lightning_csv",
        (
            Read(2, "train/acc", 0.375, step=3, epoch=0),
            Read(2, "train/loss", 1.1311004161834717),
            Read(6, "val/acc", 0.703125, step=15),
            Read(6, "val/loss", 0.8145734071731567),
            Read(7, "train/acc", 0.51953125, step=15),
        ),
    ),
    "lightning_rich/file.log": Log(
        "lightning_rich",
        (
            Read(19, "throughput/it_s", 385.13, epoch=2),
            Read(20, "train/loss", 0.464),
            Read(22, "train/acc", 1.0),
            Read(23, "val/loss", 0.606),
            Read(24, "val/acc", 0.781),
            Read(26, "train/acc", 0.773),
        ),
    ),
    "lightning_rich/h200_file.log": Log(
        "lightning_rich",
        (
            Read(22, "throughput/it_s", 30.44, epoch=5),
            Read(23, "eta_s", 0.0),
            Read(23, "train/loss", 0.066),
            Read(24, "train/acc", 1.0),
            Read(25, "val/loss", 3.971),
            Read(26, "val/acc", 0.309),
        ),
    ),
    "lightning_rich/tty.log": Log(
        "lightning_rich",
        (
            Read(19, "throughput/it_s", 445.96, epoch=0),
            Read(19, "train/loss", 1.051),
            Read(32, "throughput/it_s", 487.78, epoch=1),
            Read(32, "train/loss", 0.542),
            Read(36, "val/acc", 0.703),
            Read(36, "train/acc", 0.520),
            Read(53, "val/acc", 0.797),
            Read(53, "train/acc", 0.758),
            Read(56, "val/acc", 0.781),
            Read(56, "train/acc", 0.773),
        ),
    ),
    "megatron/ds_3d_on.log": Log(
        "megatron",
        (
            Read(2, "train/loss", 12.44502, step=2),
            Read(2, "lr", 3.750e-05),
            Read(2, "throughput/it_s", 1000 / 141096.8),
            Read(2, "throughput/samples_s", 1024 * 1000 / 141096.8),
            Read(4, "train/loss", 41.03157, step=3),
            Read(12, "train/loss", 31.23441, step=7),
        ),
    ),
    "megatron/gpt2_base_n4.log": Log(
        "megatron",
        (
            Read(1, "train/loss", 8.394111, step=60),
            Read(1, "lr", 1.494e-04),
            Read(1, "grad_norm", 5.275),
            Read(1, "throughput/it_s", 1000 / 1378.0),
            Read(12, "val/loss", 8.017406, step=100),
            Read(12, "val/ppl", 3033.3),
            Read(32, "train/loss", 7.365868, step=200),
            Read(32, "grad_norm", 3.952),
            Read(35, "val/loss", 7.487306, step=200),
            Read(35, "val/ppl", 1785.236),
        ),
    ),
    "megatron/log_dist.log": Log("megatron", (Read(11, "lr", 0.0, step=0),)),
    "metric_logger/timm_train.log": Log(
        "metric_logger",
        (
            Read(3, "train/loss", 2.10, epoch=0),
            Read(3, "lr", 0.05),
            Read(12, "train/loss", 0.782, epoch=1),
            Read(19, "train/loss", 0.134, epoch=2),
        ),
    ),
    "metric_logger/torchvision_reference.log": Log(
        "metric_logger",
        (
            Read(2, "train/loss", 2.3198, epoch=0),
            Read(2, "lr", 0.1),
            Read(2, "throughput/samples_s", 20932.271990018715),
            Read(2, "train/acc", 25.0),
            Read(2, "train/acc_top5", 75.0),
            Read(9, "val/acc", 62.5),
            Read(9, "val/acc_top5", 100.0),
            Read(13, "train/loss", 1.0682, epoch=1),
            Read(18, "val/acc", 60.938),
        ),
    ),
    "mmcv/train.log": Log(
        "mmengine",
        (
            Read(42, "train/loss", 1.1307, epoch=1),
            Read(42, "lr", 0.5),
            Read(42, "eta_s", 22.0),
            Read(47, "val/miou", 0.8782),
            Read(47, "val/pixel_acc", 0.9360),
            Read(57, "train/loss", 0.3991, epoch=3),
            Read(57, "lr", 0.05),
        ),
    ),
    "mmcv/train.log.json": Log(
        "mmengine_json",
        (
            Read(1, "train/loss", 1.13067, epoch=1),
            Read(1, "lr", 0.5),
            Read(5, "val/pixel_acc", 0.93604),
            Read(5, "val/miou", 0.8782),
            Read(15, "val/miou", 0.94894, epoch=3),
        ),
    ),
    "mmengine/train.log": Log(
        "mmengine",
        (
            Read(129, "train/loss", 0.8859, epoch=1),
            Read(129, "lr", 0.1),
            Read(136, "val/acc", 96.875),
            Read(141, "train/loss", 0.0852, epoch=2),
            Read(143, "val/acc", 100.0),
        ),
    ),
    "mmengine_json/scalars.json": Log(
        "mmengine_json",
        (
            Read(1, "train/loss", 0.8859251022338868, step=5),
            Read(1, "lr", 0.1),
            Read(5, "val/acc", 96.875),
            Read(9, "train/loss", 0.08524482697248459, step=40),
            Read(10, "val/acc", 100.0),
        ),
    ),
    "nanogpt/train.log": Log(
        "nanogpt",
        (
            Read(6, "train/loss", 3.1422, step=0),
            Read(6, "val/loss", 3.1595),
            Read(9, "train/loss", 1.7319, step=10),
            Read(9, "throughput/it_s", 1000 / 1.51),
            Read(23, "train/loss", 0.6065, step=60),
            Read(23, "val/loss", 0.5379),
        ),
    ),
    "paddle/ppcls_avg.log": Log(
        "paddle",
        (
            Read(3, "train/loss", 0.21847, epoch=1),
            Read(3, "train/acc", 0.97221),
            Read(3, "train/acc_top5", 0.97594),
            Read(4, "train/loss", 0.00008, epoch=2),
            Read(5, "train/acc", 1.0, epoch=10),
        ),
    ),
    "paddle/ppcls_config_dump.log": Log(
        "paddle",
        (  # no value from the config dump above
            Read(75, "lr", 0.00031, epoch=1),
            Read(75, "train/loss", 4.64081),
            Read(75, "throughput/samples_s", 40.64869),
            Read(75, "eta_s", 8 * 60 + 23.0),
            Read(76, "train/loss", 4.64772, epoch=1),
            Read(88, "train/loss", 3.64121, epoch=5),
            Read(89, "val/loss", 3.10458, epoch=5),
            Read(89, "val/acc", 0.62500),
            Read(90, "val/loss", 3.06763, epoch=5),
            Read(90, "val/acc", 0.58627),
            Read(90, "val/acc_top5", 0.83039),
            Read(92, "best/metric", 0.586274507933972, epoch=5),
        ),
    ),
    "paddle/ppocr_ser.log": Log(
        "paddle",
        (
            Read(1, "train/loss", 1.871535, step=10, epoch=1),
            Read(1, "lr", 0.000006),
            Read(1, "throughput/samples_s", 9.71838),
            Read(1, "eta_s", 3119.0),
            Read(2, "train/loss", 1.461939, step=19, epoch=1),
            Read(3, "val/precision", 0.11526348939743859),
            Read(3, "val/recall", 0.19776657060518732),
            Read(3, "val/hmean", 0.14564265817747712),
            Read(5, "best/hmean", 0.14564265817747712, epoch=1),
        ),
    ),
    "pandas_csv/history.csv": Log(
        None,
        (  # epoch and step columns: read as lightning_csv
            Read(3, "train/loss", 1.5417, step=100, epoch=1),
            Read(3, "val/loss", 1.6959),
            Read(3, "val/acc", 0.22),
            Read(7, "val/acc", 0.7, step=300),
            Read(7, "lr", 0.0003125),
            Read(2, "train/loss", 2.3, step=50, epoch=0),
            Read(2, "lr", 0.01),
            Read(5, "train/loss", 0.6927, step=200, epoch=3),
            Read(5, "val/acc", 0.46),
        ),
    ),
    "sb3/ppo_breakout.log": Log(
        "sb3",
        (  # Stable-Baselines3 PPO: a table is one metric,
            # given at its closing rule, at the step `total_timesteps`
            Read(16, "rollout/ep_rew_mean", 1.8, step=2048),
            Read(16, "throughput/samples_s", 180),
            Read(16, "rollout/ep_len_mean", 202),
            Read(37, "train/approx_kl", 0.0142255565, step=4096),
            Read(37, "train/loss", -0.0199),
            Read(37, "lr", 0.0003),
            Read(37, "train/value_loss", 0.049),
            Read(37, "train/entropy_loss", -1.38),
            Read(79, "rollout/ep_rew_mean", 1.87, step=8192),
            Read(79, "train/approx_kl", 0.050227404),
        ),
    ),
    "sb3/ppo_progress.csv": Log(
        "csv",
        (  # SB3's progress.csv: a row per dump, stepped by
            # `time/total_timesteps`; the first row has no `train/` cells (the header was rewritten)
            Read(2, "rollout/ep_rew_mean", 22.272727272727273, step=256),
            Read(2, "throughput/samples_s", 1964),
            Read(3, "train/loss", 46.594139099121094, step=512),
            Read(3, "lr", 0.0003),
            Read(3, "train/approx_kl", 0.0005403776),
            Read(3, "train/value_loss", 89.17843770980835),
            Read(3, "train/entropy_loss", -0.6928730010986328),
            Read(9, "train/loss", 56.87999725341797, step=2048),
            Read(9, "rollout/ep_len_mean", 28.40277777777778),
        ),
    ),
    "sb3/dqn_progress.csv": Log(
        "csv",
        (  # DQN: no `train/` cells before `learning_starts`
            Read(2, "rollout/ep_len_mean", 21.05, step=421),
            Read(2, "rollout/exploration_rate", 0.05),
            Read(2, "throughput/samples_s", 15953),
            Read(3, "train/loss", 0.48119455575942993, step=650),
            Read(3, "lr", 0.0001),
            Read(15, "train/loss", 0.006540777161717415, step=2952),
            Read(15, "rollout/ep_rew_mean", 9.6),
        ),
    ),
    "timm_csv/summary.csv": Log(
        "timm_csv",
        (
            Read(2, "train/loss", 2.4678056836128235, epoch=0),
            Read(2, "val/acc", 3.125),
            Read(2, "val/acc_top5", 71.875),
            Read(4, "val/loss", 0.3706856742501259, epoch=2),
            Read(4, "lr", 0.05),
            Read(3, "train/loss", 1.2664410422245662, epoch=1),
            Read(3, "val/acc", 40.625),
            Read(3, "val/loss", 1.5252951085567474),
        ),
    ),
    "tqdm/lightning_file.log": Log(
        "tqdm",
        (
            Read(18, "throughput/it_s", 384.11, epoch=0),
            Read(18, "train/loss", 0.708),
            Read(25, "eval/throughput/it_s", 588.80),
            Read(26, "val/loss", 0.815, epoch=1),
            Read(26, "val/acc", 0.703),
            Read(43, "throughput/it_s", 215.28, epoch=2),
            Read(43, "val/loss", 0.606),
            Read(43, "val/acc", 0.781),
        ),
    ),
    "tqdm/lightning_tty.log": Log(
        "tqdm",
        (
            Read(18, "throughput/it_s", 341.58, epoch=0),
            Read(18, "train/loss", 0.708),
            Read(25, "eval/throughput/it_s", 631.93),
            # the terminal cut these bars short of their `]`: their pairs are plain text
            Read(26, "train/loss", 0.542, epoch=1),
            Read(26, "val/loss", 0.815),
            Read(34, "val/loss", 0.675, epoch=2),
        ),
    ),
    "tqdm/tqdm_file.log": Log(
        "tqdm",
        (
            Read(1, "throughput/it_s", 183.54, epoch=1),
            Read(1, "train/loss", 0.0625),
            Read(1, "lr", 0.0001),
            Read(2, "eval/throughput/it_s", 1 / 1.20),
            Read(3, "throughput/it_s", 96.08, step=5),
            Read(3, "train/loss", 0.5),
            Read(3, "train/acc", 0.41),
        ),
    ),
    "tqdm/tqdm_tty.log": Log(
        "tqdm",
        (
            Read(1, "throughput/it_s", 182.42, epoch=1),
            Read(1, "train/loss", 0.0625),
            Read(3, "throughput/it_s", 94.88, step=5),
        ),
    ),
    "detr_json/log.txt": Log(
        "detr_json",
        (  # DETR: test_coco_eval_bbox[0] is AP, [1] AP50
            Read(1, "train/loss", 18.943505200472746, epoch=0),
            Read(1, "lr", 0.00010000000000000003),
            Read(1, "val/loss", 14.769879722595215),
            Read(1, "val/map", 0.006636939001464631),
            Read(1, "val/map_50", 0.021705962124451646),
            Read(2, "train/loss", 12.06689994985407, epoch=1),
            Read(2, "val/map", 0.018770540292195607),
            Read(2, "val/map_50", 0.05622703452677387),
            Read(3, "val/loss", 8.211896228790284, epoch=2),
            Read(3, "val/map", 0.02751621129593119),
        ),
    ),
    "deit_json/log.txt": Log(
        "detr_json",
        (  # DeiT/MAE percentages read as fractions
            Read(1, "train/loss", 5.300944681376785, epoch=0),
            Read(1, "lr", 2.4193548387096773e-05),
            Read(1, "val/loss", 4.681430000695745),
            Read(1, "val/acc", 0.014),
            Read(1, "val/acc_top5", 0.389),
            Read(6, "train/loss", 1.5442260724647052, epoch=5),
            Read(6, "val/acc", 0.672),
            Read(6, "val/acc_top5", 0.999),
            Read(6, "val/loss", 0.9501463377563567),
        ),
    ),
    "keras_csv/training.log": Log(
        "csv",
        (  # CSVLogger with its default file name
            Read(2, "train/acc", 0.4110209345817566, epoch=0),
            Read(2, "train/loss", 1.7160215377807617),
            Read(2, "val/acc", 0.469490110874176),
            Read(2, "val/loss", 1.4435802698135376),
            Read(3, "val/loss", 7.41715145111084, epoch=1),
            Read(18, "train/acc", 0.6310216188430786, epoch=16),
            Read(18, "val/loss", 1.0745148658752441),
        ),
    ),
    "llamafactory/trainer_log.jsonl": Log(
        "llamafactory",
        (
            Read(1, "train/loss", 0.6491, step=1, epoch=0.0019588638589618022),
            Read(1, "train/acc", 1.0),
            Read(1, "lr", 9.803921568627451e-10),
            Read(1, "total_steps", 5100),
            Read(1, "eta_s", 3 * 86400 + 17 * 3600 + 51 * 60 + 32),
            Read(12, "train/loss", 0.4998, step=12, epoch=0.023506366307541625),
            Read(12, "train/acc", 0.75),
            Read(12, "eta_s", 2 * 86400 + 17 * 3600 + 15 * 60 + 51),
        ),
    ),
    "trl/dpo_console.log": Log(
        "hf_trainer",
        (  # TRL DPOTrainer under LLaMA-Factory
            Read(9, "train/loss", 0.0017, epoch=0.12),
            Read(9, "grad_norm", 0.0223772581666708),
            Read(9, "lr", 2.647058823529412e-06),
            Read(9, "rewards/chosen", 10.391068458557129),
            Read(9, "rewards/accuracies", 1.0),
            Read(9, "rewards/margins", 8.68541431427002),
            Read(20, "train/loss", 0.0, epoch=1.41),
            Read(20, "rewards/margins", 15.98387622833252),
            Read(25, "rewards/margins", 16.250532150268555, epoch=2.0),
            Read(25, "logps/chosen", -47.255558013916016),
            # the last bar frame, run into an `[INFO|trainer.py:4309]` record on the same line
            Read(26, "throughput/it_s", 1 / 5.91, step=170),
            Read(26, "eta_s", 0.0),
        ),
    ),
    "trl/ppo_console.log": Log(
        "hf_trainer",
        (  # TRL PPOTrainer; `'eps': 0` is a rounding
            Read(9, "objective/kl", -0.24512894451618195, epoch=0.67),
            Read(9, "objective/rlhf_reward", 0.3954721689224243),
            Read(9, "objective/scores", 0.3832157254219055),
            Read(9, "policy/approxkl_avg", 0.3271065354347229),
            Read(9, "loss/policy_avg", -0.06062384694814682),
            Read(9, "lr", 1.5e-05),
            Read(23, "objective/kl", 1.0205090045928955, epoch=1.33),
            Read(23, "objective/rlhf_reward", 0.20578807592391968),
            Read(23, "objective/non_score_reward", -0.05102544650435448),
            Read(23, "loss/value_avg", 0.32703897356987),
            Read(23, "lr", 7.5e-06),
            Read(35, "throughput/it_s", 1 / 6.51, step=2),
            Read(35, "eta_s", 0.0),
        ),
    ),
    "ultralytics/train.log": Log(
        "ultralytics",
        (
            Read(50, "train/box_loss", 2.693, epoch=1),
            Read(50, "train/cls_loss", 2.023),
            Read(50, "train/dfl_loss", 1.734),
            Read(50, "throughput/it_s", 5.8),
            Read(52, "val/map", 0.0),
            Read(52, "val/map_50", 0.0),
            Read(55, "train/box_loss", 5.698, epoch=2),
            Read(55, "throughput/it_s", 13.8),
        ),
    ),
    "yolov5/train.log": Log(
        "ultralytics",
        (
            Read(9, "train/box_loss", 0.06359, epoch=0),
            Read(9, "train/obj_loss", 0.03304),
            Read(9, "gpu_mem_gb", 5.05),
            Read(9, "throughput/it_s", 1 / 1.79),
            Read(11, "val/map", 0.0, epoch=0),
            Read(16, "val/precision", 0.0682, epoch=1),
            Read(16, "val/recall", 0.126),
            Read(16, "val/map_50", 0.0251),
            Read(16, "val/map", 0.00763),
            Read(24, "train/box_loss", 0.03914, epoch=3),
            Read(24, "train/obj_loss", 0.02895),
            Read(26, "val/map", 0.0434, epoch=3),
        ),
    ),
    "yolov5/yolov7_final.log": Log(
        "ultralytics",
        (
            Read(3, "train/box_loss", 0.01066, epoch=1199),
            Read(3, "train/loss", 0.01346),
            Read(3, "gpu_mem_gb", 14.5),
            Read(5, "val/map_50", 0.994, epoch=1199),
            Read(5, "val/map", 0.784),
            Read(5, "val/precision", 0.992),
        ),
    ),
    "ultralytics_csv/results.csv": Log(
        "ultralytics_csv",
        (
            Read(2, "train/box_loss", 2.69252),
            Read(2, "val/map", 0.0),
            Read(2, "lr", 0.000333333),
            Read(9, "train/cls_loss", 2.93586),
            Read(9, "val/box_loss", 0.3243),
        ),
    ),
    # TensorBoard "download CSV" exports: the metric is named from the file's name
    "tensorboard_csv/run-.-tag-loss.csv": Log(
        "tensorboard_csv",
        (  # a resumed run
            Read(2, "train/loss", 2.8416740894317627, step=43),
            Read(73, "train/loss", 0.7162510752677917, step=2454),
            Read(74, "train/loss", 0.6309272050857544, step=41),
            Read(150, "train/loss", 0.1691078096628189, step=4055),
        ),
    ),
    "tensorboard_csv/run-.-tag-lr.csv": Log(
        "tensorboard_csv",
        (
            Read(2, "lr", 0.10000000149011612, step=0),
            Read(31, "lr", 0.0007999999797903001, step=29),
        ),
    ),
    "tensorboard_csv/run-.-tag-pred_age_loss.csv": Log(
        "tensorboard_csv",
        (
            Read(2, "pred_age_loss", 8.24930191040039, step=0),
            Read(31, "pred_age_loss", 3.511948823928833, step=29),
        ),
    ),
    "tensorboard_csv/run-.-tag-val_pred_gender_acc.csv": Log(
        "tensorboard_csv",
        (
            Read(2, "val_pred_gender_acc", 0.45531246066093445, step=0),
            Read(31, "val_pred_gender_acc", 0.912777841091156, step=29),
        ),
    ),
}


pytestmark = pytest.mark.usefixtures("utc_clock")  # logs stamp local time, no zone


def key(log: Path) -> str:
    return f"{log.parent.name}/{log.name}"


def test_every_golden_log_has_hand_read_values() -> None:
    from tests.unit.hand_read_unseen import UNSEEN  # logs of frameworks without a parser

    assert sorted({**HAND_READ, **UNSEEN}) == sorted(key(log) for log in LOGS)


def same(got: float, expected: float) -> bool:
    if math.isnan(expected):
        return math.isnan(got)
    return got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("name", sorted(HAND_READ))
def test_the_parse_agrees_with_the_log_read_by_eye(name: str) -> None:
    log, expected = DATA / name, HAND_READ[name]
    log_format = detect_format(_sample(log), str(log))
    if expected.format is not None:
        assert log_format == expected.format
    result = parse_whole(log, log_format)
    for read in expected.values:
        records = [r for r in result["metrics"] if r["line"] == read.line]
        values = [float(v) for r in records for n, v in r["values"] if n == read.name]
        assert values, f"line {read.line}: no {read.name} in {records}"
        assert same(values[-1], read.value), f"line {read.line}: {read.name} = {values[-1]}"
        record = next(r for r in reversed(records) if any(n == read.name for n, _ in r["values"]))
        if read.step is not None:
            assert record.get("step") == read.step, record
        if read.epoch is not None:
            assert record.get("epoch") == read.epoch, record
    assert {(f["line"], f["finding"]) for f in result["findings"]} == expected.findings
    for line in expected.unparsed:
        assert line in result["unparsed"]

"""Line findings, both ways: each kind on the lines that show it and not on look-alikes.

A finding is a claim about someone's run (OOM, NaN loss, killed), so a word that merely contains
`nan` or `Killed` must not raise one, and a component loss going NaN must.
"""

from __future__ import annotations

import math

import pytest

from parsers.findings import _KINDS, findings_from_metric, scan_line
from parsers.model import LogMetric
from parsers.registry import make_parser

DETECTRON2 = (
    "[11/26 06:01:56 d2.utils.events]:  eta: 0:00:00  iter: 19  total_loss: 1.943  "
    "loss_cls: {cls}  loss_box_reg: 0.155  time: 0.0105  data_time: 0.0000  "
    "lr: 0.020000"
)
MMENGINE = (
    "2024/05/02 10:00:00 - mmengine - INFO - Epoch(train) [2][15/20]  lr: 1.0000e-03  "
    "eta: 0:00:10  time: 0.1000  data_time: 0.0100  memory: 1200  loss: 1.2000  "
    "loss_cls: {cls}  loss_bbox: 0.5000"
)


def line_findings(line: str, log_format: str = "generic") -> list[tuple[str, str]]:
    """(kind, evidence) of everything one line gives, as `gpuherd parse` reads it."""
    found = []
    finding = scan_line(line)
    if finding is not None:
        found.append((finding.kind, finding.evidence))
    try:
        metric = make_parser(log_format).feed(line)
    except ValueError:
        metric = None
    if metric is not None:
        found += [(f.kind, f.evidence) for f in findings_from_metric(metric)]
    return found


# --- NaN and Inf ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "log_format"),
    [
        ("Training nanoGPT on shakespeare_char: step=100 loss=1.234", "generic"),
        ("step: 5 loss: nanoseconds", "generic"),
        ("iter 100: loss 1.2345, time 45.67ms, mfu 12.34%", "nanogpt"),
        ("nanoGPT: 50%|#####     | 5/10 [00:05<00:05, 1.00it/s, loss=0.5]", "tqdm"),
        (
            "Epoch 1/3  ━━━━━━━━━━━━━━━━ 10/10 0:00:05 • 0:00:00 30.44it/s v_num: 0.000 "
            "train_loss: nanoGPT",
            "lightning_rich",
        ),
        (
            "Epoch 1/3  ━━━━━━━━━━━━━━━━ 10/10 0:00:05 • 0:00:00 30.44it/s v_num: 0.000 "
            "train_loss: info",
            "lightning_rich",
        ),
    ],
)
def test_a_word_containing_nan_is_not_a_nan(line: str, log_format: str) -> None:
    assert line_findings(line, log_format) == []


@pytest.mark.parametrize(
    ("line", "log_format", "evidence"),
    [
        ("step=100 loss=nan", "generic", "train/loss = nan at step 100"),
        ("step: 5 loss: NaN", "generic", "train/loss = nan at step 5"),
        (
            "Epoch 1/3  ━━━━━━━━━━━━━━━━ 10/10 0:00:05 • 0:00:00 30.44it/s v_num: 0.000 "
            "train_loss: nan",
            "lightning_rich",
            "train/loss = nan in epoch 1",
        ),
        # the next print ran into the bar right after the value
        (
            "Epoch 1/3  ━━━━━━━━━━━━━━━━ 10/10 0:00:05 • 0:00:00 30.44it/s v_num: 0.000 "
            "train_loss: nan`Trainer.fit` stopped",
            "lightning_rich",
            "train/loss = nan in epoch 1",
        ),
        ("iter 100: loss nan, time 45.67ms, mfu 12.34%", "nanogpt", "train/loss = nan at step 100"),
    ],
)
def test_a_nan_loss_is_a_nan(line: str, log_format: str, evidence: str) -> None:
    assert line_findings(line, log_format) == [("nan", evidence)]


def test_infinity_spelled_out_is_an_inf() -> None:
    line = (
        "Epoch 2/3  ━━━━━━━━━━━━━━━━ 10/10 0:00:05 • 0:00:00 30.44it/s v_num: 0.000 "
        "train_loss: infinity"
    )
    assert line_findings(line, "lightning_rich") == [("inf", "train/loss = inf in epoch 2")]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_component_loss_going_bad_is_found(value: str) -> None:
    kind = "nan" if value == "nan" else "inf"
    assert line_findings(DETECTRON2.format(cls=value), "detectron2") == [
        (kind, f"loss_cls = {float(value)} at step 19")
    ]
    assert line_findings(MMENGINE.format(cls=value), "mmengine") == [
        (kind, f"loss_cls = {float(value)} in epoch 2")
    ]


def test_healthy_component_losses_give_nothing() -> None:
    assert line_findings(DETECTRON2.format(cls="1.788"), "detectron2") == []


@pytest.mark.parametrize("name", ["loss_cls", "train/box_loss", "val/loss", "loss", "aux_loss_2"])
def test_every_loss_named_value_is_checked(name: str) -> None:
    found = findings_from_metric(LogMetric(values=((name, math.nan),), step=3, epoch=1.0))
    assert [(f.kind, f.evidence) for f in found] == [("nan", f"{name} = nan at step 3 in epoch 1")]


@pytest.mark.parametrize("name", ["val/acc", "lr", "grad_norm", "throughput/it_s"])
def test_a_non_finite_value_that_is_no_loss_is_not_a_finding(name: str) -> None:
    assert findings_from_metric(LogMetric(values=((name, math.nan), (name, math.inf)))) == []


def test_every_bad_loss_of_a_line_is_listed_in_order() -> None:
    metric = LogMetric(
        values=(("loss_cls", math.inf), ("acc", math.nan), ("loss_bbox", math.nan), ("loss", 0.5))
    )
    assert [(f.kind, f.evidence) for f in findings_from_metric(metric)] == [
        ("inf", "loss_cls = inf"),
        ("nan", "loss_bbox = nan"),
    ]


# --- Killed and crashes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    ["Killed", "  Killed", "/bin/sh: line 1: 4242 Killed", "Segmentation fault (core dumped)"],
)
def test_a_kill_or_crash_of_the_process_is_found(line: str) -> None:
    assert line_findings(line) == [("killed", line.strip())]


@pytest.mark.parametrize(
    "line",
    [
        "Killed 3 stale workers before the restart",
        "INFO: process Killed by user request, restarting",
        "OOMKilled",
        "xKilled",
        "the Killed column counts processes the watchdog stopped: 0",
    ],
)
def test_killed_inside_a_sentence_is_not_a_kill(line: str) -> None:
    assert line_findings(line) == []


# --- the other kinds, each with a look-alike -------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        ("RuntimeError: Out of memory while allocating", "oom"),
        ("OSError: [Errno 12] can't allocate memory", "oom"),
        ("Traceback (most recent call last):", "traceback"),
        ("NCCL WARN Call to connect returned Connection refused", "nccl"),
        ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", "nccl"),
        ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)", "nccl"),
        ("RuntimeError: CUDA error: device-side assert triggered", "cuda_error"),
        # no lower-case "c": the keyword's own letters decide, not any "c" of the line
        ("RuntimeError: CUDA error: invalid argument", "cuda_error"),
        ('Downloading: "https://download.pytorch.org/models/resnet18.pth"', "download"),
        ("Fetching 3 files: 100%|##########| 3/3 [00:01<00:00,  2.50it/s]", "download"),
        ("model.safetensors:  50%|#####     | 1.2G/2.4G [00:01<00:01, 1.2GB/s]", "download"),
    ],
)
def test_each_kind_on_the_line_that_shows_it(line: str, kind: str) -> None:
    assert line_findings(line) == [(kind, line)]


# A line for each keyword of `_KINDS` that holds no other keyword: `scan_line` tests the
# keywords first, spelled out for speed, so a keyword missing there silences its kind.
KEYWORD_LINES = {
    "emory": "RuntimeError: Out of memory while allocating",
    "Traceback": "Traceback (most recent call last):",
    "NCCL": "NCCL WARN Call to connect returned Connection refused",
    "Watchdog": "[PG 0 Rank 1] Watchdog caught collective operation timeout after 600000 ms",
    "CUDA error: ": "RuntimeError: CUDA error: device-side assert triggered",
    "Killed": "Killed",
    "Segmentation fault": "Segmentation fault (core dumped)",
    "ownload": 'Downloading: "https://download.pytorch.org/models/resnet18.pth"',
    "Fetching": "Fetching 3 files: 100%|##########| 3/3 [00:01<00:00,  2.50it/s]",
    "B/s": "model.safetensors:  50%|#####     | 1.2G/2.4G [00:01<00:01, 1.2GB/s]",
}


def test_every_keyword_of_every_kind_reaches_its_pattern() -> None:
    words = {word: kind for kind, kind_words, _ in _KINDS for word in kind_words}
    assert words.keys() == KEYWORD_LINES.keys()  # a new keyword needs its line here
    for word, line in KEYWORD_LINES.items():
        assert [w for w in words if w in line] == [word], line
        assert line_findings(line) == [(words[word], line)], word


@pytest.mark.parametrize(
    "line",
    [
        "Memory usage: 3.2 GiB of 80 GiB",
        "max memory allocated: 12.5 GiB",
        "Traceback logging is enabled",
        "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
        "CUDA errors: 0",
        "downloaded 3 files from the cache",
        "weights.safetensors loaded",
        "Epoch 3: 100%|##########| 50/50 [00:05<00:00, 9.50it/s]",
        "Saving model checkpoint to out/checkpoint-500",
    ],
)
def test_look_alikes_are_not_findings(line: str) -> None:
    assert scan_line(line) is None


def test_evidence_is_the_visible_line_stripped_and_capped() -> None:
    assert scan_line("\x1b[31m  CUDA out of memory  \x1b[0m") is not None
    assert scan_line("\x1b[31m  CUDA out of memory  \x1b[0m").evidence == "CUDA out of memory"
    long = "CUDA out of memory. " + "x" * 400
    assert scan_line(long).evidence == long[:300]


def test_only_the_start_of_a_huge_line_is_searched() -> None:
    assert scan_line("x" * 1500 + " CUDA out of memory").kind == "oom"
    assert scan_line("x" * 2100 + " CUDA out of memory") is None

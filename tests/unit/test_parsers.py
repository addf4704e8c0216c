"""Pure parser pieces: line clean-up, numbers, names, findings, health rules, the registry."""

from __future__ import annotations

import math
import time

import pytest

from parsers import health
from parsers.findings import findings_from_metric, scan_line
from parsers.framework_formats import Detectron2Parser, parse_mmengine_line
from parsers.keyvalue import parse_generic_line, parse_jsonl_line
from parsers.model import LogMetric
from parsers.registry import DOCUMENT_FORMATS, FORMAT_NAMES, FORMATS, detect_format, make_parser
from parsers.table_formats import CsvParser
from parsers.text import MAX_LINE_CHARS, metric_name, normalise_line, parse_duration, parse_number
from parsers.tqdm_bar import parse_tqdm_line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e-5", 1e-5),
        ("-inf", -math.inf),
        ("inf", math.inf),
        ("1,234.5", 1234.5),
        ("'6.193'", 6.193),
        ("12.5%", 12.5),
        ("-0.25", -0.25),
        ("Infinity", math.inf),
        ("1,234,567", 1234567.0),
    ],
)
def test_parse_number_spellings(text: str, expected: float) -> None:
    assert parse_number(text) == expected


def test_parse_number_nan_is_a_value() -> None:
    assert math.isnan(parse_number("nan"))
    assert math.isnan(parse_number("NaN"))


@pytest.mark.parametrize("text", ["", "abc", "1,0,696", "1.2.3", "12,34"])
def test_parse_number_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_number(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00:03", 3.0),
        ("00:03", 3.0),
        ("1 day, 2:57:46", 97066.0),
        ("1.5s", 1.5),
        ("12ms", 0.012),
        ("2 days, 0:00:01", 172801.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_timestamps_of_one_second_are_converted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # time.mktime cost up to 20 us a line on a loaded host; a log writes many lines a second.
    calls = []
    real_mktime = time.mktime

    def counting_mktime(parts: tuple) -> float:
        calls.append(parts)
        return real_mktime(parts)

    monkeypatch.setattr(time, "mktime", counting_mktime)
    lines = [
        f"2031-05-06 07:08:{second:02},{ms:03} INFO step={ms} loss=0.5"
        for second in (9, 10)
        for ms in range(500)
    ]
    stamps = [parse_generic_line(line).taken_at for line in lines]  # type: ignore[union-attr]
    assert len(calls) == 2
    assert stamps[0] == real_mktime((2031, 5, 6, 7, 8, 9, 0, 0, -1))
    assert stamps[500] - stamps[0] == pytest.approx(1.0)


def test_cached_timestamps_follow_a_time_zone_change(monkeypatch: pytest.MonkeyPatch) -> None:
    line = "2032-05-06 07:08:09,000 INFO step=1 loss=0.5"
    try:
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()
        utc = parse_generic_line(line).taken_at  # type: ignore[union-attr]
        monkeypatch.setenv("TZ", "EST+05")
        time.tzset()
        est = parse_generic_line(line).taken_at  # type: ignore[union-attr]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert est - utc == 5 * 3600


def test_normalise_keeps_the_last_visible_carriage_return_segment() -> None:
    line = "a 10%\rb 20%\r\x1b[2K\r   \r"
    assert normalise_line(line) == "b 20%"


def test_normalise_strips_ansi_backspaces_and_newline() -> None:
    assert normalise_line("\x1b[1m 1/12\x1b[0m x\b\b loss: 1\n") == " 1/12 x loss: 1"


def test_normalise_caps_the_length() -> None:
    assert len(normalise_line("x" * (MAX_LINE_CHARS * 5))) == MAX_LINE_CHARS


def test_normalise_of_a_huge_redrawn_line_keeps_the_newest_state() -> None:
    line = "\r".join(f"step={i}" for i in range(200_000))
    assert normalise_line(line) == "step=199999"


@pytest.mark.parametrize(
    ("key", "split", "name"),
    [
        ("loss", "train", "train/loss"),
        ("eval_loss", "train", "val/loss"),
        ("val_acc", "train", "val/acc"),
        ("train_acc_step", "train", "train/acc"),
        ("Acc@1", "val", "val/acc"),
        ("acc5", "val", "val/acc_top5"),
        ("metrics/mAP50-95(B)", "train", "val/map"),
        ("metrics/mAP50(B)", "train", "val/map_50"),
        ("coco/bbox_mAP_50", "val", "val/map_50"),
        ("mIoU", "val", "val/miou"),
        ("aAcc", "val", "val/pixel_acc"),
        ("learning_rate", "train", "lr"),
        ("lr-AdamW", "train", "lr"),
        ("total_loss", "train", "train/loss"),
        ("eval_top1", "train", "val/acc"),
        ("loss_rpn_cls", "train", "loss_rpn_cls"),
        ("eval_runtime", "train", "eval_runtime"),
        ("mAP", "train", "val/map"),
    ],
)
def test_metric_names(key: str, split: str, name: str) -> None:
    assert metric_name(key, split) == name


def test_tqdm_seconds_per_iteration_becomes_a_rate() -> None:
    metric = parse_tqdm_line("eval: 100%|██████████| 3/3 [00:03<00:00,  1.20s/it]")
    assert metric is not None
    assert dict(metric.values)["eval/throughput/it_s"] == pytest.approx(1 / 1.2)


def test_tqdm_download_bars_are_not_training() -> None:
    line = "model.safetensors:  45%|████▌     | 90.0M/200M [00:01<00:01, 80.0MB/s]"
    assert parse_tqdm_line(line) is None
    finding = scan_line(line)
    assert finding is not None and finding.kind == "download"


def test_generic_line_with_key_equals_and_colon() -> None:
    metric = parse_generic_line("epoch: 3 step=120 loss=0.25 val_acc: 81.5% lr=3e-4")
    assert metric is not None
    assert metric.step == 120 and metric.epoch == 3
    assert metric.as_dict() == {"train/loss": 0.25, "val/acc": 81.5, "lr": 3e-4}


def test_generic_line_bad_value_raises() -> None:
    with pytest.raises(ValueError):
        parse_generic_line("step=3 loss=1,0,696")


def test_generic_ignores_source_locations() -> None:
    assert parse_generic_line("RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0.") is None


@pytest.mark.parametrize(
    "line",
    [
        # Lightning 2.6 banners and warnings, from its console on an H200
        "TPU available: False, using: 0 TPU cores",
        "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]",
        "Trainable params: 1.0 M                                                         ",
        "Non-trainable params: 0",
        "Modules in train mode: 17",
        "Total FLOPs: 0",
        "`Trainer.fit` stopped: `max_epochs=6` reached.",
        "/home/user/venv/lib/python3.12/site-packages/lightning/pytorch/trainer/connectors/"
        "data_connector.py:434: The 'train_dataloader' does not have many workers which may be a "
        "bottleneck. Consider increasing the value of the `num_workers` argument` to "
        "`num_workers=15` in the `DataLoader` to improve performance.",
        "Epoch 5/5  ━━━━━━━━━━━━━━━━ 157/157 0:00:05 •        30.44it/s v_num: 0.000     ",
        # warnings and tips never give metrics, whatever pairs they hold
        "train.py:12: UserWarning: loss=nan seen, skipping the batch",
        "2026-01-01 10:00:00,000 WARNING step=3 loss=0.5",
        "💡 Tip: try batch_size: 64 for speed",
        # prose around a known key
        "Saving the model with val_loss=0.123 to /ckpt after epoch 3 because it improved",
    ],
)
def test_generic_rejects_banners_warnings_and_prose(line: str) -> None:
    assert parse_generic_line(line) is None


@pytest.mark.parametrize(
    ("line", "values"),
    [
        (
            "2026-11-26 06:07:46,953 INFO step=5 loss=1.1545 lr=0.05 grad_norm=0.606",
            {"train/loss": 1.1545, "lr": 0.05, "grad_norm": 0.606},
        ),
        (
            "Epoch 1 | val_loss: 1.2023 | val_acc: 60.00% | tokens/s: 123,456.0",
            {"val/loss": 1.2023, "val/acc": 60.0, "throughput/tokens_s": 123456.0},
        ),
        ("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300000", {"train/loss": 2.3}),
        ("epoch 0 step 100 loss=3.000 acc=0.10", {"train/loss": 3.0, "train/acc": 0.1}),
        ("INFO foo=1 bar=2", {"foo": 1.0, "bar": 2.0}),
        ("perplexity: 12.5", {"train/ppl": 12.5}),
        ("LOCAL_RANK: 0 loss=0.25", {"train/loss": 0.25}),  # the setting is no metric
        # PyTorch's MNIST example: the test set is its validation set, a count of a total a share
        (
            "Test set: Average loss: 0.0275, Accuracy: 9910/10000 (99%)",
            {"val/loss": 0.0275, "val/acc": 0.991},
        ),
    ],
)
def test_generic_parses_metric_shaped_lines(line: str, values: dict[str, float]) -> None:
    metric = parse_generic_line(line)
    assert metric is not None and metric.as_dict() == values


def test_rich_bar_with_its_remaining_time_wrapped_to_the_next_line() -> None:
    parser = make_parser("lightning_rich")
    head = parser.feed("Epoch 5/5  ━━━━━━━━━━━━ 157/157 0:00:05 •        30.44it/s v_num: 0.000")
    assert head is not None and head.as_dict() == {"throughput/it_s": 30.44}
    wrapped = parser.feed(" " * 36 + "0:01:30" + " " * 20 + "train_loss: 0.066")
    assert wrapped is not None and wrapped.as_dict() == {"eta_s": 90.0, "train/loss": 0.066}
    assert wrapped.epoch == 5.0
    later = parser.feed(" " * 63 + "val_acc: 0.309")
    assert later is not None and later.as_dict() == {"val/acc": 0.309}


def test_jsonl_broken_object_raises_and_nan_is_a_value() -> None:
    with pytest.raises(ValueError):
        parse_jsonl_line('{"step": 3, "loss": 0.')
    metric = parse_jsonl_line('{"step": 4, "loss": NaN, "note": "x"}')
    assert metric is not None and metric.step == 4
    assert math.isnan(metric.as_dict()["train/loss"])


def test_detectron2_newer_printer_line() -> None:
    # detectron2 >= 0.6 prints last_time/last_data_time and losses with 4 significant digits
    parser = Detectron2Parser()
    metric = parser.feed(
        "[05/02 10:00:00 d2.utils.events]:  eta: 1:02:03  iter: 1999  total_loss: 0.8123  "
        "loss_cls: 0.2011  time: 0.2500  last_time: 0.2400  data_time: 0.0100  "
        "last_data_time: 0.0090   lr: 0.02  max_mem: 4312M"
    )
    assert metric is not None and metric.step == 1999
    values = metric.as_dict()
    assert values["eta_s"] == 3723 and values["train/loss"] == 0.8123
    assert values["throughput/it_s"] == pytest.approx(4.0) and values["max_mem_mb"] == 4312
    assert "last_time" not in values and "data_time" not in values


def test_mmseg_iteration_based_validation_line() -> None:
    metric = parse_mmengine_line(
        "05/02 10:00:00 - mmengine - INFO - Iter(val) [500/500]    aAcc: 93.1000  "
        "mIoU: 69.0300  mAcc: 78.1200  data_time: 0.0024  time: 0.0700"
    )
    assert metric is not None and metric.step == 500 and metric.taken_at is None
    assert metric.as_dict() == {"val/pixel_acc": 93.1, "val/miou": 69.03, "mAcc": 78.12}


def test_csv_parser_needs_the_header_again_after_reset() -> None:
    parser = CsvParser()
    assert parser.feed("epoch,step,train_loss") is None
    assert parser.feed("0,9,0.5") == LogMetric(values=(("train/loss", 0.5),), step=9, epoch=0.0)
    parser.reset()
    # after a reset the next line is the header again: a line of numbers names no column, so
    # it and every later row are unparsed, never metrics under names such as "0"
    for row in ("0,10,0.4", "loss,acc", "1,11,0.3"):
        with pytest.raises(ValueError, match="no header"):
            parser.feed(row)
    parser.reset()
    assert parser.feed("epoch,step,train_loss") is None
    assert parser.feed("1,12,0.2") == LogMetric(values=(("train/loss", 0.2),), step=12, epoch=1.0)
    csv = CsvParser()
    csv.feed("epoch,loss")
    with pytest.raises(ValueError):
        csv.feed("1,0.5,7")


def test_scan_line_kinds() -> None:
    cases = {
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.": "oom",
        "Traceback (most recent call last):": "traceback",
        'Downloading: "https://example.org/w.pth" to /cache/w.pth': "download",
        "Fetching 4 files: 100%|██████████| 4/4": "download",
    }
    for line, kind in cases.items():
        finding = scan_line(line)
        assert finding is not None and finding.kind == kind, line
    assert scan_line("iter 100: loss 2.3456, time 12.34ms, mfu 1.23%") is None


def test_findings_from_metric_nan_and_inf() -> None:
    metric = LogMetric(
        values=(("train/loss", math.nan), ("val/loss", math.inf), ("grad_norm", math.nan)), step=7
    )
    kinds = [(f.kind, f.evidence) for f in findings_from_metric(metric)]
    assert kinds == [("nan", "train/loss = nan at step 7"), ("inf", "val/loss = inf at step 7")]
    assert findings_from_metric(LogMetric(values=(("train/loss", 1.0),))) == []


def _series(values: list[float]) -> list[tuple[float, float]]:
    return [(float(i), v) for i, v in enumerate(values)]


def test_stalled_fires_on_a_flat_loss_only() -> None:
    flat = _series([2.0 + 0.001 * (i % 3) for i in range(60)])
    falling = _series([2.0 - 0.02 * i for i in range(60)])
    found = health.stalled(flat)
    assert found is not None and found.kind == "stalled" and "steps 30-59" in found.evidence
    assert health.stalled(falling) is None
    assert health.stalled(flat[:10]) is None


def test_chance_level_on_imagenet_scale() -> None:
    val = _series([0.1, 0.09, 0.11])  # percent: 0.10 % top-1 on 1000 classes
    train = _series([5.0, 20.0, 40.0])
    found = health.chance_level(val, num_classes=1000, train_acc=train)
    assert found is not None and found.kind == "chance"
    assert health.chance_level(_series([10.0, 12.0, 15.0]), 1000, train) is None
    assert health.chance_level(val, 1000, _series([40.0, 30.0, 20.0])) is None


def test_zero_metric_while_loss_falls() -> None:
    loss = _series([3.0, 2.5, 2.0, 1.5, 1.2, 1.0, 0.9, 0.8])
    found = health.zero_metric_while_loss_falls(_series([0.0, 0.0, 0.0]), loss, "val/map")
    assert found is not None and found.kind == "zero_metric" and "val/map" in found.evidence
    assert health.zero_metric_while_loss_falls(_series([0.0, 0.01]), loss) is None
    flat = _series([1.0] * 8)
    assert health.zero_metric_while_loss_falls(_series([0.0, 0.0]), flat) is None


def test_overfitting_gap() -> None:
    found = health.overfitting(_series([0.99]), _series([0.6]))
    assert found is not None and found.kind == "overfitting"
    assert health.overfitting(_series([99.0]), _series([90.0])) is None


def test_registry_names_and_errors() -> None:
    assert FORMAT_NAMES[: len(FORMATS)] == tuple(name for name, _, _ in FORMATS)
    assert "hf_trainer_state" in DOCUMENT_FORMATS
    with pytest.raises(ValueError, match="document"):
        make_parser("hf_trainer_state")
    with pytest.raises(ValueError, match="unknown"):
        make_parser("nope")
    assert detect_format([]) == "generic"
    assert detect_format(["{}"], "run/checkpoint-8/trainer_state.json") == "hf_trainer_state"


def test_parsers_are_independent_instances() -> None:
    first, second = make_parser("keras"), make_parser("keras")
    first.feed("Epoch 4/9")
    metric = second.feed("12/12 - 0s - 5ms/step - loss: 0.5")
    assert metric is not None and metric.epoch is None

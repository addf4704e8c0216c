"""Tables printed in logs, read by the generic reader by their structure (`table_lines`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.model import LogMetric
from parsers.registry import make_parser
from parsers.table_lines import NOT_TABLE, TABLE_REACH, TableLines

YOLO_HEADER = "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size"
YOLO_ROW = (
    "        1/2      3.2G      2.693      2.023      1.734          8         64: 100% "
    "━━━━━━━━━━━━ 2/2 5.8it/s 0.3s"
)
VAL_HEADER = (
    "                 Class     Images  Instances      Box(P          R      mAP50  "
    "mAP50-95): 100% ━━━━━━━━━━━━ 1/1 14.4it/s 0.1s"
)
VAL_ALL = "                   all        128        929      0.699      0.606      0.672      0.446"
VAL_CLASS = "             person        128        254      0.805      0.674      0.771      0.517"


def feed(lines: list[str], parser_format: str = "generic") -> list[tuple[int, LogMetric]]:
    """(line number from 1, metric) of every line that gives one."""
    parser = make_parser(parser_format)
    return [
        (number, metric)
        for number, line in enumerate(lines, 1)
        if (metric := parser.feed(line)) is not None
    ]


def values(metric: LogMetric) -> dict[str, float]:
    return dict(metric.values)


def test_a_header_row_table_gives_each_row_its_columns_and_epoch() -> None:
    ((number, metric),) = feed([YOLO_HEADER, YOLO_ROW])
    assert number == 2 and metric.epoch == 1 and metric.step is None
    assert values(metric) == {
        "gpu_mem_gb": 3.2,
        "train/box_loss": 2.693,
        "train/cls_loss": 2.023,
        "train/dfl_loss": 1.734,
        "throughput/it_s": 5.8,
    }  # `Instances` and `Size` are counts


@pytest.mark.parametrize(("between", "read"), [(TABLE_REACH - 1, True), (TABLE_REACH, False)])
def test_a_header_reaches_only_a_few_lines(between: int, read: bool) -> None:
    got = feed([YOLO_HEADER, *["Closing dataloader mosaic"] * between, YOLO_ROW])
    assert bool(got) is read


def test_rows_keep_the_header_while_they_follow_each_other() -> None:
    rows = [YOLO_ROW.replace("1/2", f"{epoch}/9") for epoch in range(1, 6)]
    assert [m.epoch for _, m in feed([YOLO_HEADER, *rows])] == [1, 2, 3, 4, 5]


def test_a_row_with_a_column_missing_is_no_row() -> None:
    short = "        1/2      3.2G      2.693      2.023          8         64"
    assert feed([YOLO_HEADER, short]) == []


def test_a_second_table_replaces_the_first_and_its_summary_row_takes_the_epoch() -> None:
    got = feed([YOLO_HEADER, YOLO_ROW, VAL_HEADER, VAL_ALL, VAL_CLASS])
    assert [number for number, _ in got] == [2, 4]  # a single class's row is a detail
    val = got[1][1]
    assert val.epoch == 1
    assert values(val) == {
        "val/precision": 0.699,
        "val/recall": 0.606,
        "val/map_50": 0.672,
        "val/map": 0.446,
    }


def test_an_evaluation_row_far_below_the_training_row_names_no_epoch() -> None:
    filler = ["Saving checkpoint to /tmp/last.pt"] * 12
    *_, (_, val) = feed([YOLO_HEADER, YOLO_ROW, *filler, VAL_HEADER, VAL_ALL])
    assert val.epoch is None


def test_yolov5_loss_parts_under_a_tqdm_bar_are_read_beside_the_bar() -> None:
    lines = [
        "     Epoch   gpu_mem       box       obj       cls     total    labels  img_size",
        "     3/299     4.89G   0.03914   0.02895         0   0.06809         1      1280: "
        "100%|██████████| 213/213 [06:11<00:00,  1.74s/it]",
    ]
    ((_, metric),) = feed(lines, "tqdm")
    assert metric.epoch == 3
    assert values(metric)["train/box_loss"] == 0.03914
    assert values(metric)["train/loss"] == 0.06809  # `total`, in a training table
    assert values(metric)["gpu_mem_gb"] == 4.89
    assert math.isclose(values(metric)["throughput/it_s"], 1 / 1.74)  # the bar's


def test_memory_in_megabytes_becomes_gigabytes() -> None:
    ((_, metric),) = feed(["Epoch  GPU_mem  loss", "2/5  512M  0.25"])
    assert values(metric) == {"gpu_mem_gb": 0.5, "train/loss": 0.25}


def test_detectron2_copypaste_rows_take_their_task_as_a_prefix() -> None:
    prefix = "[11/26 06:01:57 d2.evaluation.testing]: copypaste: "
    got = feed(
        [
            prefix + "Task: bbox",
            prefix + "AP,AP50,AP75,APs,APm,APl",
            prefix + "40.2,61.0,43.8,nan,44.0,52.1",
        ]
    )
    ((number, metric),) = got
    assert number == 3
    assert values(metric)["val/map"] == 40.2 and values(metric)["val/map_50"] == 61.0
    assert values(metric)["bbox/AP75"] == 43.8 and math.isnan(values(metric)["bbox/APs"])


def test_a_markdown_table_skips_its_alignment_row() -> None:
    ((number, metric),) = feed(
        ["| AP | AP50 | AP75 |", "|:---:|:---:|:---:|", "| 40.2 | 61.0 | 43.8 |"]
    )
    assert number == 3 and values(metric) == {"val/map": 40.2, "val/map_50": 61.0, "AP75": 43.8}


def test_a_ruled_summary_table_and_its_per_class_table() -> None:
    lines = [
        "+---------+-------+-------+",
        "|  Class  |  IoU  |  Acc  |",
        "+---------+-------+-------+",
        "| label_a | 80.19 | 100.0 |",
        "+---------+-------+-------+",
        "Summary:",
        "+-------+-------+-------+",
        "|  aAcc |  mIoU |  mAcc |",
        "+-------+-------+-------+",
        "| 100.0 | 80.19 | 100.0 |",
        "+-------+-------+-------+",
    ]
    ((number, metric),) = feed(lines)
    assert number == 10
    assert values(metric) == {"val/pixel_acc": 100.0, "val/miou": 80.19, "val/macc": 100.0}


SB3_TABLE = [
    "-----------------------------------------",
    "| rollout/                |             |",
    "|    ep_rew_mean          | 1.53        |",
    "| time/                   |             |",
    "|    fps                  | 62          |",
    "|    iterations           | 3           |",
    "|    total_timesteps      | 6144        |",
    "| train/                  |             |",
    "|    learning_rate        | 0.0003      |",
    "|    loss                 | -0.0789     |",
    "|    clip_range           | 0.2         |",
    "-----------------------------------------",
]


def test_a_name_value_table_is_one_metric_at_its_closing_rule() -> None:
    ((number, metric),) = feed(SB3_TABLE)
    assert number == len(SB3_TABLE) and metric.step == 6144
    # iterations are a counter and clip_range a setting: no metrics
    assert values(metric) == {
        "rollout/ep_rew_mean": 1.53,
        "throughput/samples_s": 62,
        "lr": 0.0003,
        "train/loss": -0.0789,
    }


def test_a_name_value_table_ended_by_another_line_keeps_that_lines_values() -> None:
    got = feed(["| loss | 0.5 |", "| acc | 0.9 |", "step: 10 lr: 0.1"])
    ((number, metric),) = got
    assert number == 3 and metric.step == 10
    assert values(metric) == {"train/loss": 0.5, "train/acc": 0.9, "lr": 0.1}


def test_lightnings_test_table_has_its_split() -> None:
    lines = [
        "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┓",
        "┃        Test metric        ┃       DataLoader 0        ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩",
        "│         test_acc          │    0.8999999761581421     │",
        "│           dice            │    0.75                   │",
        "└───────────────────────────┴───────────────────────────┘",
    ]
    ((number, metric),) = feed(lines)
    assert number == 6
    assert values(metric) == {"test/acc": 0.8999999761581421, "test/dice": 0.75}


MODEL_SUMMARIES = {
    "keras2": [
        "Layer (type)                 Output Shape              Param #  ",
        "=================================================================",
        "input_1 (InputLayer)         [(None, 4)]               0        ",
        "custom_mlp_fc0 (Dense)       (None, 64)                320      ",
        "Total params: 4,480",
    ],
    "keras3": [
        "┏━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┓",
        "┃ Layer (type)         ┃ Output Shape       ┃   Param # ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━┩",
        "│ conv2d (Conv2D)      │ (None, 26, 26, 32) │       320 │",
        "│ dense (Dense)        │ (None, 10)         │    16,010 │",
        "└──────────────────────┴────────────────────┴───────────┘",
    ],
    "torchinfo": [
        "Layer (type:depth-idx)                   Output Shape              Param #",
        "Net                                      [1, 10]                   --",
        "├─Conv2d: 1-1                            [1, 32, 26, 26]           320",
    ],
    "lightning_rich": [
        "┃   ┃ Name ┃ Type   ┃ Params ┃ Mode  ┃ FLOPs ┃",
        "│ 0 │ net  │ Linear │     27 │ train │     0 │",
    ],
    "lightning_plain": [
        "  | Name    | Type             | Params | Mode ",
        "-----------------------------------------------------",
        "0 | model   | Sequential       | 27     | train",
        "1 | loss_fn | CrossEntropyLoss | 0      | train",
    ],
    "metric_columns": [
        "  | Name | Type   | Params | loss | acc",
        "0 | net  | Linear | 27     | 0.5  | 0.9",
    ],
    "ultralytics": [
        "                   from  n    params  module                arguments",
        "  0                  -1  1       464  ultralytics.Conv      [3, 16, 3, 2]",
    ],
}


@pytest.mark.parametrize("name", sorted(MODEL_SUMMARIES))
def test_a_model_summary_is_no_metric(name: str) -> None:
    assert feed(MODEL_SUMMARIES[name]) == []


def test_a_pipe_separated_record_is_left_to_the_record_reader() -> None:
    tables = TableLines()
    assert tables.read("| epoch 1 | loss 2.31 | lr 0.001 |") == NOT_TABLE
    ((_, metric),) = feed(["| epoch 1 | loss 2.31 | lr 0.001 |"])
    assert metric.epoch == 1 and values(metric)["train/loss"] == 2.31


def test_a_line_of_no_table_is_turned_away_without_state() -> None:
    tables = TableLines()
    assert tables.read("step: 10 loss: 0.5") is NOT_TABLE
    assert tables.read("") is NOT_TABLE


def test_reset_forgets_the_header() -> None:
    tables = TableLines()
    tables.read(YOLO_HEADER)
    tables.reset()
    assert tables.read(YOLO_ROW) == NOT_TABLE


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.lists(
                st.sampled_from(
                    [
                        "|",
                        "│",
                        "┃",
                        " ",
                        "  ",
                        "-",
                        "+",
                        ",",
                        ": ",
                        "Epoch",
                        "loss",
                        "1/2",
                        "3.2G",
                        "nan",
                        "all",
                        "AP",
                        "P",
                        "Class",
                        "0.5",
                        "x/",
                        "Params",
                        "total_timesteps",
                        "━",
                        "└",
                        "e+",
                        "1e999",
                    ]
                ),
                max_size=12,
            ).map("".join),
        ),
        max_size=8,
    )
)
def test_any_lines_raise_nothing_but_value_error(lines: list[str]) -> None:
    for name in ("generic", "tqdm"):
        parser = make_parser(name)
        for line in lines:
            try:
                parser.feed(line)
            except ValueError:
                pass
    tables = TableLines()
    for line in lines:
        claimed, metric = tables.read(line)
        assert isinstance(claimed, bool) and (metric is None or metric.values)

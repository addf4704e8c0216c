"""YOLOv5, Megatron / DeepSpeed and Keras 2 consoles, read from public logs line by line.

Each log is a verbatim excerpt under tests/data/logs (see its README for the repository, path
and commit); the expected numbers are read off the lines themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuherd.parse.parse_command import iter_lines
from parsers.model import LogMetric
from parsers.registry import detect_format, make_parser

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


pytestmark = pytest.mark.usefixtures("utc_clock")  # logs stamp local time, no zone


def lines(name: str) -> list[str]:
    with (LOGS / name).open("rb") as handle:
        return list(iter_lines(handle))


def parse(name: str) -> tuple[str, dict[int, LogMetric]]:
    text = lines(name)
    log_format = detect_format(text[:200], name)
    parser = make_parser(log_format)
    found = {}
    for number, line in enumerate(text, 1):
        metric = parser.feed(line)
        if metric is not None:
            found[number] = metric
    return log_format, found


def test_yolov5_epoch_rows_and_the_validation_all_row() -> None:
    # Before, the `gpu_mem box obj cls` table and the `mAP@.5:.95` header were unknown:
    # the log read as bare tqdm bars (a throughput, no loss and no mAP).
    log_format, found = parse("yolov5/train.log")
    assert log_format == "ultralytics"
    # `1/299  4.89G  0.0479  0.03484  0  1  1280: 100%|...| 213/213 [06:11<00:00,  1.74s/it]`
    row = found[14]
    assert row.epoch == 1
    # the epoch's bar: its time left is no ETA of the run
    assert dict(row.values) == {
        "gpu_mem_gb": 4.89,
        "train/box_loss": 0.0479,
        "train/obj_loss": 0.03484,
        "train/cls_loss": 0.0,
        "throughput/it_s": pytest.approx(1 / 1.74),
    }
    val = found[16]  # `all  677  2449  0.0682  0.126  0.0251  0.00763`
    assert val.epoch == 1
    assert val.values == (
        ("val/precision", 0.0682),
        ("val/recall", 0.126),
        ("val/map_50", 0.0251),
        ("val/map", 0.00763),
    )
    assert found[9].epoch == 0  # YOLOv5 counts epochs from 0, as it prints them
    assert sorted(found) == [9, 11, 14, 16, 19, 21, 24, 26]


def test_yolov7_total_loss_column_and_rows_without_a_bar() -> None:
    # a YOLOv7 README kept the final frame only: no `: 100%|...` after the row or the header
    log_format, found = parse("yolov5/yolov7_final.log")
    assert log_format == "ultralytics"
    assert found[3].epoch == 1199
    assert found[3].values == (
        ("gpu_mem_gb", 14.5),
        ("train/box_loss", 0.01066),
        ("train/obj_loss", 0.004235),
        ("train/cls_loss", 0.0),
        ("train/loss", 0.01346),
    )
    assert found[5].values == (
        ("val/precision", 0.992),
        ("val/recall", 0.978),
        ("val/map_50", 0.994),
        ("val/map", 0.784),
    )
    assert sorted(found) == [3, 5]


def test_megatron_iteration_line_e_notation_and_time_per_iteration() -> None:
    log_format, found = parse("megatron/gpt2_base_n4.log")
    assert log_format == "megatron"
    first = found[1]
    assert first.step == 60
    assert dict(first.values) == {
        "lr": 1.494e-04,
        "train/loss": 8.394111,
        "grad_norm": 5.275,
        "skipped_iterations": 0.0,
        "nan_iterations": 0.0,
        "throughput/it_s": pytest.approx(1000 / 1378.0),
        "throughput/samples_s": pytest.approx(4 * 1000 / 1378.0),
    }
    # `time (ms) | forward-compute: 175.85 | ...` lines are timers, not metrics
    assert 2 not in found
    # ` validation loss at iteration 100 | lm loss value: 8.017406E+00 | lm loss PPL: 3.033300E+03`
    val = found[12]
    assert val.step == 100
    assert val.values == (("val/loss", 8.017406), ("val/ppl", 3033.3))
    assert found[35].values == (("val/loss", 7.487306), ("val/ppl", 1785.236))


def test_megatron_deepspeed_lm_loss_with_a_hyphen() -> None:
    log_format, found = parse("megatron/ds_3d_on.log")
    assert log_format == "megatron"
    assert 1 not in found  # `[Rank 59] (after 1 iterations) memory (MB) | ...`
    assert found[4].step == 3
    assert dict(found[4].values)["train/loss"] == 41.03157
    assert dict(found[4].values)["throughput/samples_s"] == pytest.approx(1024 * 1000 / 137138.4)


def test_deepspeed_log_dist_step_line() -> None:
    log_format, found = parse("megatron/log_dist.log")
    assert log_format == "megatron"
    assert sorted(found) == [11]
    # `[2021-06-10 20:47:51,885] ... [Rank 0] step=0, skipped=0, lr=[0.0, 0.0], ...`
    metric = found[11]
    assert metric.step == 0 and metric.values == (("lr", 0.0),)
    assert metric.taken_at == 1623358071.0


def test_deepspeed_step_and_timer_lines() -> None:
    # Two consecutive lines of a public DeepSpeed-Chat log (the search corpus did not name
    # its repository): two parameter groups, and the throughput timer.
    parser = make_parser("megatron")
    step = parser.feed(
        "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=4, "
        "lr=[4.99804827338393e-05, 4.99804827338393e-05], mom=[(0.9, 0.95), (0.9, 0.95)]"
    )
    assert step is not None and step.step == 10
    assert step.values == (("lr", 4.99804827338393e-05),)
    timer = parser.feed(
        "[2023-11-07 01:55:23,714] [INFO] [timer.py:260:stop] epoch=0/micro_step=40/"
        "global_step=10, RunningAvgSamplesPerSec=25.025771473496132, CurrSamplesPerSec="
        "25.704280480541442, MemAllocated=4.32GB, MaxMemAllocated=38.49GB"
    )
    assert timer is not None and timer.step == 10
    assert timer.values == (("throughput/samples_s", 25.704280480541442),)
    assert timer.taken_at == 1699322123.0
    # DeepSpeed before 0.7.3 wrote `epoch/step` alone
    older = parser.feed(
        "[2022-08-29 06:58:56,176] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec="
        "232.7340551694273, CurrSamplesPerSec=227.48090316379353, MemAllocated=0.36GB, "
        "MaxMemAllocated=15.06GB"
    )
    assert older is not None and older.step == 20
    assert older.values == (("throughput/samples_s", 227.48090316379353),)


def test_megatron_lines_that_are_not_iteration_lines() -> None:
    parser = make_parser("megatron")
    assert parser.feed("setting validation data start iteration to 0") is None
    assert parser.feed("[after megatron is initialized] iteration 5/ 10 | lm loss: 1.0") is None
    with pytest.raises(ValueError):
        parser.feed(" iteration       10/    1000 | lm loss: tensor(1.0) |")


def test_keras2_counting_samples_gives_samples_per_second_and_the_scheduler_lr() -> None:
    # `Train on 60000 samples` then `60000/60000 [===] - 12s 195us/step`: the time is per
    # sample. Before, the rate was `throughput/it_s` and the scheduler's lr was dropped.
    log_format, found = parse("keras2/lr_scheduler.log")
    assert log_format == "keras"
    # `Epoch 00001: LearningRateScheduler setting learning rate to 0.003.`
    assert found[4].values == (("lr", 0.003),)
    assert found[4].epoch == 1
    assert dict(found[5].values) == {
        "throughput/samples_s": pytest.approx(1 / 195e-6),
        "train/loss": 0.2537,
        "train/acc": 0.9194,
        "val/loss": 0.0578,
        "val/acc": 0.9816,
    }
    assert found[5].epoch == 1
    assert found[8].values == (("lr", 0.0022744503),)
    assert found[9].epoch == 2


def test_keras2_per_sample_unit() -> None:
    # TensorFlow 2.0 and 2.1 write `us/sample` (a line of a public notebook export; the search
    # corpus did not name its repository)
    parser = make_parser("keras")
    assert parser.feed("Epoch 3/3") is None
    metric = parser.feed(
        "38400/38400 [==============================] - 9s 247us/sample - "
        "loss: 0.7983 - accuracy: 0.7527 - val_loss: 0.8466 - val_accuracy: 0.7380"
    )
    assert metric is not None and metric.epoch == 3
    assert dict(metric.values) == {
        "throughput/samples_s": pytest.approx(1 / 247e-6),
        "train/loss": 0.7983,
        "train/acc": 0.7527,
        "val/loss": 0.8466,
        "val/acc": 0.7380,
    }
    # a batch-counting Keras (TensorFlow 2.2 and later) keeps steps per second
    parser.reset()
    metric = parser.feed("1875/1875 [==============================] - 3s 2ms/step - loss: 0.2")
    assert metric is not None and dict(metric.values)["throughput/it_s"] == 500.0


def test_fairseq_epoch_summary_and_validation_lines() -> None:
    # fairseq 0.9 `simple` format; before, these lines read as nothing at all
    log_format, found = parse("fairseq/roberta_race.log")
    assert log_format == "fairseq"
    train = found[1]
    assert (train.step, train.epoch) == (27301, 5)
    assert dict(train.values) == {
        "train/loss": 0.158,
        "train/nll_loss": 0.0,
        "train/ppl": 1.0,
        "throughput/tokens_s": 770.0,
        "lr": 1e-05,
        "grad_norm": 25.694,
        "train/acc": 0.96072,
    }
    # `ups 0` is rounded, not a stopped run; `best_accuracy` repeats an earlier value
    val = found[2]
    assert (val.step, val.epoch) == (27301, 5)
    assert val.values == (
        ("val/loss", 1.066),
        ("val/nll_loss", 0.003),
        ("val/ppl", 1.0),
        ("val/acc", 0.833231),
    )
    assert sorted(found) == [1, 2]  # `| saved checkpoint ... (epoch 5 @ 27301 updates)`


def test_fairseq_later_formats() -> None:
    # lines of public fairseq logs the search corpus did not name the repository of:
    # fairseq >= 0.10 with its logging prefix, a progress line, and the tqdm format
    parser = make_parser("fairseq")
    inner = parser.feed(
        "2023-06-13 17:31:54 | INFO | train_inner | epoch 143:    185 / 282 loss=3.153, "
        "nll_loss=1.243, glat_accu=0.508, glat_context_p=0.473, word_ins=3.034, length=3.068, "
        "ppl=8.89, wps=132396, ups=2.18, wpb=60718.4, bsz=2141.4, num_updates=40200, "
        "lr=0.00015772, gnorm=0.483, clip=0, loss_scale=32768, train_wall=46, wall=0"
    )
    assert inner is not None and (inner.step, inner.epoch) == (40200, 143)
    assert dict(inner.values)["train/loss"] == 3.153
    assert dict(inner.values)["throughput/it_s"] == 2.18
    assert inner.taken_at == 1686677514.0
    valid = parser.feed(
        "2023-06-13 17:32:41 | INFO | valid | epoch 143 | valid on 'valid' subset | loss 12.677 "
        "| nll_loss 11.546 | word_ins 12.459 | length 4.375 | ppl 6550.94 | bleu 29.52 | "
        "wps 88225 | wpb 21176.3 | bsz 666.3 | num_updates 40297 | best_bleu 30.53"
    )
    assert valid is not None and (valid.step, valid.epoch) == (40297, 143)
    assert dict(valid.values)["val/bleu"] == 29.52
    assert dict(valid.values)["val/ppl"] == 6550.94
    assert "best_bleu" not in dict(valid.values)
    tqdm_format = parser.feed(
        "epoch 002 | valid on 'valid' subset | loss 0.557 | ppl 1.47 | F1-score 0.666667 | "
        "wps 549.4 | wpb 18 | bsz 1.5 | num_updates 4 | best_F1-score 0.666667      "
    )
    assert tqdm_format is not None and (tqdm_format.step, tqdm_format.epoch) == (4, 2)
    assert dict(tqdm_format.values)["val/F1-score"] == 0.666667
    assert parser.feed("| epoch 001:   0%|          | 0/2 [00:00<?, ?it/s]") is None


def test_paddleocr_train_eval_and_best_metric_lines() -> None:
    log_format, found = parse("paddle/ppocr_ser.log")
    assert log_format == "paddle"
    first = found[1]
    assert (first.step, first.epoch) == (10, 1)
    assert first.values == (
        ("lr", 0.000006),
        ("train/loss", 1.871535),
        ("throughput/samples_s", 9.71838),
        ("eta_s", 51 * 60 + 59.0),
    )
    assert first.taken_at == 1659976108.0
    assert found[3].values == (
        ("val/precision", 0.11526348939743859),
        ("val/recall", 0.19776657060518732),
        ("val/hmean", 0.14564265817747712),
        ("eval/throughput/samples_s", 34.008392345050055),
    )
    best = found[5]
    assert best.epoch == 1
    assert dict(best.values) == {
        "best/hmean": 0.14564265817747712,
        "best/precision": 0.11526348939743859,
        "best/recall": 0.19776657060518732,
    }
    assert sorted(found) == [1, 2, 3, 5]


def test_paddleclas_epoch_average_and_iteration_lines() -> None:
    log_format, found = parse("paddle/ppcls_avg.log")
    assert log_format == "paddle"
    assert found[3].epoch == 1
    assert found[3].values == (
        ("CELoss", 0.21847),
        ("train/loss", 0.21847),
        ("train/acc", 0.97221),
        ("train/acc_top5", 0.97594),
    )
    assert found[5].epoch == 10
    # a PaddleClas iteration line from a public script's comment (repository not named by
    # the search corpus): the scheduler's name in brackets, a days-long ETA
    metric = make_parser("paddle").feed(
        "# # [2022/07/05 10:38:20] ppcls INFO: [Train][Epoch 1/120][Iter: 0/5005]"
        "lr(PiecewiseDecay): 0.10000000, top1: 0.00000, top5: 0.00391, CELoss: 7.02506, "
        "loss: 7.02506, batch_cost: 6.29051s, reader_cost: 3.57217, ips: 40.69624 samples/s, "
        "eta: 43 days, 17:27:58"
    )
    assert metric is not None and metric.epoch == 1
    assert dict(metric.values) == {
        "lr": 0.1,
        "train/acc": 0.0,
        "train/acc_top5": 0.00391,
        "CELoss": 7.02506,
        "train/loss": 7.02506,
        "throughput/samples_s": 40.69624,
        "eta_s": 43 * 86400 + 17 * 3600 + 27 * 60 + 58.0,
    }


def test_paddleclas_config_dump_gives_no_metrics() -> None:
    # PaddleClas logs its YAML config as `key : value` lines before training; before, the
    # optimizer's `learning_rate : 0.0125` became the run's first lr (the warm-up's real one
    # is 0.00031) and `epochs : 10` a metric named `epochs`
    log_format, found = parse("paddle/ppcls_config_dump.log")
    assert log_format == "paddle"
    assert sorted(found) == [75, 76, 78, 79, 81, 82, 84, 85, 87, 88, 89, 90, 92]
    assert found[75].values[0] == ("lr", 0.00031)
    _, found = parse("paddle/ppcls_avg.log")
    assert sorted(found) == [3, 4, 5]  # line 2 is `    epochs : 10`, without the log prefix
    # PaddleOCR's dump has the same shape (a public `tools/eval.py` run; its repository was not
    # named by the search corpus); a section header ends at the colon
    parser = make_parser("paddle")
    assert parser.feed("[2024/12/09 16:00:51] ppocr INFO:     epoch_num : 500") is None
    assert parser.feed("[2024/12/09 16:00:51] ppocr INFO:         learning_rate : 0.001") is None
    assert parser.feed("[2024/12/09 16:00:51] ppocr INFO:     Head :") is None


def test_trl_ppo_console_dicts_give_kl_and_rewards() -> None:
    # TRL's PPOTrainer console: its dicts open with `'eps'`, not `'loss'`, so before, the log
    # was read as plain tqdm and gave the last bar alone; its `generation_config` notice
    # quotes a dict after a colon, which is no log dict
    log_format, found = parse("trl/ppo_console.log")
    assert log_format == "hf_trainer"
    assert sorted(found) == [9, 23, 35]
    first = dict(found[9].values)
    assert found[9].epoch == 0.67
    assert first["objective/kl"] == -0.24512894451618195
    assert first["objective/rlhf_reward"] == 0.3954721689224243
    assert first["objective/scores"] == 0.3832157254219055
    assert first["loss/policy_avg"] == -0.06062384694814682
    assert first["lr"] == 1.5e-05
    assert "eps" not in first and "throughput/samples_s" not in first  # `'eps': 0`, rounded
    assert dict(found[23].values)["objective/kl"] == 1.0205090045928955
    assert found[35].step == 2 and dict(found[35].values)["throughput/it_s"] == 1 / 6.51
    # a PPO dict wrapped over lines in a public README (repository not named by the search
    # corpus): its first line, cut short, with episodes a second above zero
    metric = make_parser("hf_trainer").feed(
        "{'eps': 11, 'objective/kl': 21.6345, 'objective/entropy': 0.8880,"
    )
    assert metric is not None and metric.values == (
        ("throughput/samples_s", 11.0),
        ("objective/kl", 21.6345),
        ("objective/entropy", 0.888),
    )
    # the same rule drops a label map printed by a Trainer script (hf_trainer/seq_label.log)
    _, found = parse("hf_trainer/seq_label.log")
    assert "Our label2id: {'O': 0" in lines("hf_trainer/seq_label.log")[4]
    assert 5 not in found

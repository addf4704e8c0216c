"""Printed mappings (`parsers.mapping_line`): Python dicts and JSON objects on a log line."""

from __future__ import annotations

import json
import math
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.generic_context import GenericParser
from parsers.json_document import is_record_document, read_record_document
from parsers.json_records import EPOCH_KEYS, STEP_KEYS
from parsers.keyvalue import parse_generic_line, parse_plain_line
from parsers.mapping_line import MAX_DEPTH, MAX_PROSE_WORDS, find_mapping, parse_mapping_line
from parsers.registry import FRAMEWORK_FORMATS, detect_format, make_parser


def values(line: str) -> dict[str, float]:
    metric = parse_mapping_line(line)
    assert metric is not None, line
    return dict(metric.values)


def test_a_trainer_dict_gives_its_values_at_its_epoch() -> None:
    metric = parse_mapping_line(
        "{'loss': 0.0017, 'grad_norm': 0.02, 'learning_rate': 2.6e-06, "
        "'rewards/chosen': 10.39, 'epoch': 0.5}"
    )
    assert metric is not None
    assert dict(metric.values) == {
        "train/loss": 0.0017,
        "grad_norm": 0.02,
        "lr": 2.6e-06,
        "rewards/chosen": 10.39,
    }
    assert (metric.epoch, metric.step) == (0.5, None)


def test_quoted_numbers_of_transformers_5_are_numbers() -> None:
    metric = parse_mapping_line("{'loss': '6.193', 'grad_norm': '0.6046', 'epoch': '1.016'}")
    assert metric is not None and metric.epoch == 1.016
    assert dict(metric.values) == {"train/loss": 6.193, "grad_norm": 0.6046}


def test_the_eval_prefix_is_the_validation_side() -> None:
    assert values("{'eval_loss': 3.91, 'eval_accuracy': 0.5, 'epoch': 1.0}") == {
        "val/loss": 3.91,
        "val/acc": 0.5,
    }


def test_the_end_of_run_record_reports_the_run_mean_and_a_step_dict_beside_it_does_not() -> None:
    line = (
        "{'loss': 0.405, 'epoch': 3.0}{'train_runtime': 120.5, 'train_loss': 0.812, 'epoch': 3.0}"
    )
    got = parse_mapping_line(line)
    assert got is not None
    assert ("train/loss", 0.405) in got.values and ("train/loss_run_mean", 0.812) in got.values
    assert ("train/loss", 0.812) not in got.values


@pytest.mark.parametrize(
    ("episodes", "expected"), [("0", None), ("1", 1.0), ("'0'", None), ("12", 12.0)]
)
def test_trl_online_dicts_open_with_episodes_a_second(
    episodes: str,
    expected: float | None,
) -> None:
    got = values(f"{{'eps': {episodes}, 'objective/kl': -0.24, 'lr': 3e-06}}")
    assert got.get("throughput/samples_s") == expected
    assert got["objective/kl"] == -0.24  # no metric word, yet no configuration either


def test_a_json_object_after_a_logging_prefix_with_numbers_as_strings() -> None:
    line = (
        '2024-05-01 10:00:00 | INFO | train | {"loss": "0.5", "step": "10", '
        '"eval": {"acc": 0.9, "deep": {"f1": 0.7}}}'
    )
    metric = parse_generic_line(line)
    assert metric is not None and metric.step == 10 and metric.taken_at is not None
    assert dict(metric.values) == {"train/loss": 0.5, "val/acc": 0.9, "eval/deep/f1": 0.7}


def test_a_dict_cut_short_by_a_redraw_keeps_the_values_it_has() -> None:
    line = (
        "{'loss': 0.0527, 'learning_rate': 2.2e-05, 'epoch': 3.77358490 60%|██████    | "
        "600/1000 [06:05<28:12,  4.23s/it]"
    )
    metric = parse_mapping_line(line)
    assert metric is not None and metric.epoch == 3.7735849
    assert dict(metric.values) == {"train/loss": 0.0527, "lr": 2.2e-05}
    # a bar first, then a dict whose `}` never came
    assert values("65%|██| 650/1000 [06:16<01:21,  4.30it/s]{'loss': 0.0513, 'epoch': 4.0") == {
        "train/loss": 0.0513
    }


def test_a_value_quoted_in_a_sentence_is_no_record() -> None:
    sentence = (
        "`generation_config` default values have been modified to match model-specific "
        "defaults: {'bos_token_id': 50256, 'loss': 1.0}"
    )
    assert parse_mapping_line(sentence) is None
    words = " ".join(["word"] * MAX_PROSE_WORDS)
    assert values(f"{words}: {{'loss': 1.0, 'epoch': 1}}") == {"train/loss": 1.0}
    assert parse_mapping_line(f"{words} more: {{'loss': 1.0, 'epoch': 1}}") is None
    # a logger's own prefix ends in a colon without a blank: no sentence
    assert values(f"{words} more INFO:root:{{'loss': 1.0}}") == {"train/loss": 1.0}


def test_a_configuration_printed_as_a_dict_is_no_metric() -> None:
    assert parse_mapping_line("{'lr': 0.001, 'epochs': 10, 'batch_size': 32}") is None
    assert parse_mapping_line("{'heartRate': 60, 'timestamp': 1729021969.4}") is None
    # a counter or a measured name makes it a record
    assert values("{'lr': 0.001, 'epoch': 1}") == {"lr": 0.001}
    assert values("{'lr': 0.001, 'val_acc': 0.9}") == {"lr": 0.001, "val/acc": 0.9}


def test_the_generic_parser_drops_a_configuration_before_the_run_begins() -> None:
    parser = GenericParser()
    assert parser.feed("{'lr': 0.001, 'weight_decay': 0.01}") is None
    assert parser.feed("{'loss': 0.5, 'epoch': 1.0}") is not None


def test_words_are_no_values_and_a_known_metric_that_is_no_number_is_an_error() -> None:
    assert parse_mapping_line("{'eos_token': '<|endoftext|>', 'pad_token': '<pad>'}") is None
    assert values("{'loss_type': 'sigmoid', 'loss': 0.5, 'done': True, 'x': None}") == {
        "train/loss": 0.5
    }
    with pytest.raises(ValueError, match="not a number"):
        parse_mapping_line("{'loss': 'abc', 'epoch': '1.5'}")


def test_numpy_and_torch_scalars_are_numbers_and_other_calls_are_not() -> None:
    got = values(
        "{'eval_accuracy': np.float64(0.85), 'eval_loss': tensor(0.52, device='cuda:0'),"
        " 'counts': defaultdict(int, {'a': 3}), 'eval_f1': np.float32(0.5)}"
    )
    assert got == {"val/acc": 0.85, "val/loss": 0.52, "eval_f1": 0.5}


def test_lists_hold_no_metric_and_reading_goes_on_after_them() -> None:
    assert (
        values("{'dice': [0.91, 0.88], 'shape': (3, 4), 'loss': nan, 'epoch': 2}")["train/loss"]
        != 0.0
    )  # nan: read, not skipped
    assert math.isnan(values("{'dice': [0.9, [1, 2]], 'loss': nan}")["train/loss"])


def test_nesting_is_read_to_its_bound_and_cut_there() -> None:
    def nested(depth: int) -> str:
        return "{'a': " * (depth - 1) + "{'loss': 1.0}" + "}" * (depth - 1)

    deepest = "x/" + "a/" * (MAX_DEPTH - 2) + "loss"
    assert values("{'val_acc': 0.5, 'x': " + nested(MAX_DEPTH - 1) + "}") == {
        "val/acc": 0.5,
        deepest: 1.0,
    }
    assert values("{'val_acc': 0.5, 'x': " + nested(MAX_DEPTH) + "}") == {"val/acc": 0.5}


def test_the_cheap_guard_and_where_a_mapping_opens() -> None:
    assert find_mapping("step 3 loss 0.5") == -1
    assert find_mapping("{ 'a': 1}") == -1  # a blank after the brace: no printed dict
    assert find_mapping("x {\"a\": 1} {'b': 2}") == 2
    assert find_mapping("x {'a': 1} {\"b\": 2}") == 2


def test_a_long_dict_among_a_console_format_s_plain_lines_is_read() -> None:
    # longer than `MAX_PLAIN_CHARS`: a dict is no dump however many keys it has
    line = "{" + ", ".join(f"'completions/k{i}': {i}.5" for i in range(60)) + ", 'loss': 0.1}"
    assert len(line) > 512
    metric = parse_plain_line(line)
    assert metric is not None and ("train/loss", 0.1) in metric.values
    parser = make_parser("tqdm")
    parser.feed(" 10%|█         | 1/10 [00:01<00:09,  1.00it/s]")
    fed = parser.feed(line)
    assert fed is not None and len(fed.values) == 61


SPECIAL_KEYS = STEP_KEYS | EPOCH_KEYS | {"time", "timestamp", "taken_at", "eps", "train_runtime"}
"""Keys that are counters, dates or markers rather than values."""
KEYS = st.text(alphabet=string.ascii_lowercase + "_/", min_size=1, max_size=12).filter(
    lambda key: key.strip("_/") == key and "//" not in key and key not in SPECIAL_KEYS
)
NUMBERS = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, NUMBERS, min_size=1, max_size=8), st.booleans())
def test_every_number_printed_in_a_dict_is_read_back(
    record: dict[str, float], as_json: bool
) -> None:
    record = {**record, "epoch": 1.0}
    text = json.dumps(record) if as_json else repr(record)
    metric = parse_mapping_line("INFO " + text)
    assert metric is not None and metric.epoch == 1.0
    assert sorted(value for _, value in metric.values) == sorted(
        value for key, value in record.items() if key != "epoch"
    )


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("{}[]()'\":,.=-+eE0123456789 abnNifx\\\n")), max_size=120
    ).map(lambda text: "{'" + text)
)
def test_any_text_after_a_brace_raises_nothing_but_value_error(line: str) -> None:
    try:
        parse_mapping_line(line)
    except ValueError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_nothing_but_value_error(data: bytes) -> None:
    line = "{'" + data.decode("utf-8", "replace")
    try:
        parse_mapping_line(line)
        parse_generic_line(line)
    except ValueError:
        pass


WORDS = st.text(alphabet=string.ascii_letters + " <|>", min_size=1, max_size=10).filter(
    lambda word: word.strip().lower() not in {"nan", "inf", "infinity"}
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, WORDS, min_size=1, max_size=6))
def test_words_never_become_a_metric(record: dict[str, str]) -> None:
    try:
        assert parse_mapping_line(repr(record)) is None
    except ValueError:
        pass  # a known metric's value that is no number


HISTORY = """{
  "best_metric": 0.5,
  "history": [
    {"epoch": 1, "loss": "0.9", "val": {"acc": 0.5}},
    {"epoch": 2, "loss": 0.7, "note": "resumed"},
    {"epoch": -1, "loss": 0.6},
    {"lr": 0.001}
  ],
  "tags": [{"name": "a"}]
}
"""


def test_a_json_document_is_read_record_by_record_by_its_structure() -> None:
    lines = HISTORY.splitlines()
    assert is_record_document(lines)
    assert detect_format(lines, "any/name.json", FRAMEWORK_FORMATS) == "json_document"
    metrics, unparsed = read_record_document(HISTORY)
    assert [(dict(m.values), m.epoch) for m in metrics] == [
        ({"train/loss": 0.9, "val/acc": 0.5}, 1.0),
        ({"train/loss": 0.7}, 2.0),
    ]
    assert [number for number, _ in unparsed] == [3]  # a negative epoch; the settings: nothing
    assert read_record_document('[{"step": 3, "loss": 1.5}]')[0][0].step == 3


@pytest.mark.parametrize(
    "text",
    [
        '{"loss": 0.5, "epoch": 1}',  # a JSON line: the line formats read it
        '{\n  "architectures": "x",\n  "hidden_size": 768\n}',  # an object with no list
        "loss: 0.5",
        "",
        "[1, 2, 3]\n",
        # a configuration printed as JSON at the top of a training log
        '{\n  "gpus": [\n    0\n  ]\n}\nEpoch 1 loss: 0.5\n',
    ],
)
def test_other_text_is_no_record_document(text: str) -> None:
    assert not is_record_document(text.splitlines())

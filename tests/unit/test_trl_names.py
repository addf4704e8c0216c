"""TRL preference metrics keep their names on the training side and get `val/` on evaluation."""

from __future__ import annotations

import pytest

from parsers.hf_trainer import read_trainer_state
from parsers.text import metric_name


@pytest.mark.parametrize(
    ("key", "name"),
    [
        # keys of the `***** eval metrics *****` block of a TRL DPO run (tests/data/logs/README.md,
        # JonOlsenCa/LLM_fine-tuning training/DPO_results.md) and of its training dicts
        ("eval_rewards/margins", "val/rewards/margins"),
        ("eval_rewards/accuracies", "val/rewards/accuracies"),
        ("eval_logps/chosen", "val/logps/chosen"),
        ("eval_logits/rejected", "val/logits/rejected"),
        ("eval_loss", "val/loss"),
        ("rewards/margins", "rewards/margins"),
        ("logps/rejected", "logps/rejected"),
        ("objective/kl", "objective/kl"),
        ("eval_runtime", "eval_runtime"),
    ],
)
def test_trl_metric_names(key: str, name: str) -> None:
    assert metric_name(key) == name


def test_a_dpo_trainer_state_entry_names_its_evaluation_side() -> None:
    metrics, unparsed = read_trainer_state(
        '{"log_history": [{"epoch": 2.0, "eval_loss": 0.0, "eval_rewards/margins": 16.5783, '
        '"eval_rewards/accuracies": 1.0, "step": 170}]}'
    )
    assert unparsed == []
    assert metrics[0].as_dict() == {
        "val/loss": 0.0,
        "val/rewards/margins": 16.5783,
        "val/rewards/accuracies": 1.0,
    }
    assert (metrics[0].step, metrics[0].epoch) == (170, 2.0)

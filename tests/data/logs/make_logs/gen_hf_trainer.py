"""Train a tiny GPT-2 (built from a local config, no downloads) with the Hugging Face Trainer."""

from __future__ import annotations

import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (n, 16), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    out = sys.argv[1]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    args = TrainingArguments(
        output_dir=out,
        num_train_epochs=3,
        per_device_train_batch_size=8,
        logging_steps=3,
        eval_strategy="epoch",
        save_strategy="epoch",
        learning_rate=5e-3,
        report_to=[],
        use_cpu=os.environ.get("GEN_ACCELERATOR", "cpu") == "cpu",
        disable_tqdm=len(sys.argv) > 2 and sys.argv[2] == "notqdm",
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=Tokens(64, 0),
        eval_dataset=Tokens(16, 1),
    )
    trainer.train()


if __name__ == "__main__":
    main()

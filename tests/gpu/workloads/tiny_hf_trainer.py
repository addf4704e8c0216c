"""A tiny real Hugging Face Trainer run on the GPU: random data, a small MLP, a few hundred steps.

Each step sleeps a little (a callback) so the run lasts about 40 s; with `disable_tqdm` the
Trainer prints its loss dicts (`{'loss': ..., 'epoch': ...}`) to stdout, which the test
redirects into the followed log.

    python -u tiny_hf_trainer.py OUTPUT_DIR [--steps 400] [--sleep 0.1]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments


class RandomData(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        out = self.net(x)
        loss = nn.functional.mse_loss(out, labels) if labels is not None else None
        return {"loss": loss, "logits": out}


class Slow(TrainerCallback):
    """A slow data pipeline: the run lasts long enough to watch."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.sleep_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--sleep", type=float, default=0.1)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "this run is meant for the GPU"
    training = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=32,
        learning_rate=1e-3,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = Trainer(
        model=Tiny(),
        args=training,
        train_dataset=RandomData(args.steps * 32),
        callbacks=[Slow(args.sleep)],
    )
    started = time.time()
    trainer.train()
    print(f"finished in {time.time() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()

"""Run mmengine's Runner on a tiny model and dataset (CPU): its text log and JSON scalars."""

from __future__ import annotations

import sys

import torch
from mmengine.evaluator import BaseMetric
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import Dataset


class Toy(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(n)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"inputs": self.x[i], "labels": self.y[i]}


class Net(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, inputs, labels, mode="tensor"):
        logits = self.fc(inputs)
        if mode == "loss":
            return {"loss": torch.nn.functional.cross_entropy(logits, labels)}
        if mode == "predict":
            return logits, labels
        return logits


class Accuracy(BaseMetric):
    def process(self, data_batch, data_samples) -> None:
        logits, labels = data_samples
        self.results.append({"n": len(labels), "ok": (logits.argmax(1) == labels).sum().item()})

    def compute_metrics(self, results) -> dict:
        return {"accuracy": 100 * sum(r["ok"] for r in results) / sum(r["n"] for r in results)}


def main() -> None:
    loader = dict(
        batch_size=8,
        sampler=dict(type="DefaultSampler", shuffle=True),
        collate_fn=dict(type="default_collate"),
    )
    runner = Runner(
        model=Net(),
        work_dir=sys.argv[1],
        train_dataloader=dict(dataset=Toy(160), **loader),
        val_dataloader=dict(dataset=Toy(32), **loader),
        train_cfg=dict(by_epoch=True, max_epochs=2, val_interval=1),
        val_cfg=dict(),
        val_evaluator=dict(type=Accuracy),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1, momentum=0.9)),
        default_hooks=dict(logger=dict(type="LoggerHook", interval=5)),
        randomness=dict(seed=0),
    )
    runner.train()


if __name__ == "__main__":
    main()

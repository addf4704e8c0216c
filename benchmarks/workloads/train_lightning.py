"""A small, real PyTorch Lightning image-classification run used to record the demo session.

The data is generated (no download): each class has its own mean pattern plus noise, so the
model really learns and the validation accuracy climbs. Runs on the GPU when there is one.
"""

from __future__ import annotations

import argparse
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int, classes: int, size: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    # Smooth class patterns (8x8 upsampled) that a conv net can learn; noise keeps it non-trivial.
    coarse = torch.randn(classes, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    patterns = nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
    labels = torch.randint(0, classes, (n,), generator=g)
    images = 0.1 * patterns[labels] + torch.randn(n, 3, size, size, generator=g)
    return TensorDataset(images, labels)


class Net(L.LightningModule):
    def __init__(self, classes: int, width: int, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(32 * width, classes),
        )

    def training_step(self, batch, _):
        x, y = batch
        logits = self.body(x)
        loss = nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", acc, prog_bar=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self.body(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--train", type=int, default=40_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--logdir", default="lightning_logs_demo")
    args = parser.parse_args()
    torch.manual_seed(0)
    train = DataLoader(make_data(args.train, 10, args.size, 1), batch_size=args.batch, shuffle=True)
    val = DataLoader(make_data(args.train // 8, 10, args.size, 2), batch_size=args.batch)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        logger=CSVLogger(args.logdir, name="demo"),
        log_every_n_steps=10,
        enable_checkpointing=False,
        callbacks=[TQDMProgressBar(refresh_rate=10)],
    )
    started = time.time()
    trainer.fit(Net(10, args.width, 0.02), train, val)
    print(f"finished in {time.time() - started:.1f}s")


if __name__ == "__main__":
    main()

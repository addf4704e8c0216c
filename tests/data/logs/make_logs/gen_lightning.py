"""Train a tiny LightningModule on CPU with the TQDM or Rich bar and a CSVLogger."""

from __future__ import annotations

import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(8, 3)

    def training_step(self, batch, _):
        x, y = batch
        logits = self.net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", acc, prog_bar=True, on_epoch=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    bar, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
    train = DataLoader(TensorDataset(x, y), batch_size=16)
    val = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16)
    callback = RichProgressBar() if bar == "rich" else TQDMProgressBar(refresh_rate=1)
    trainer = L.Trainer(
        max_epochs=3,
        accelerator=os.environ.get("GEN_ACCELERATOR", "cpu"),
        callbacks=[callback],
        logger=CSVLogger(out, name="lightning_logs"),
        log_every_n_steps=4,
        enable_model_summary=True,
    )
    trainer.fit(Tiny(), train, val)


if __name__ == "__main__":
    main()

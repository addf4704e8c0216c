"""A tiny real Lightning run on the GPU: random data, a small MLP, a few hundred steps.

Each step sleeps a little so the run lasts long enough (about 40 s) to be watched; it prints a
`step=N loss=X` line every few steps to stdout, which the test redirects into the followed log.
With `--csv`, Lightning's `CSVLogger` also writes `lightning_logs/version_0/metrics.csv` under
the working directory, opening and closing it at each flush.

    python -u tiny_lightning.py [--steps 400] [--sleep 0.1] [--csv]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger
except ImportError:  # the older distribution name
    import pytorch_lightning as L  # type: ignore[no-redef]
    from pytorch_lightning.loggers import CSVLogger  # type: ignore[no-redef]


class Tiny(L.LightningModule):
    def __init__(self, sleep_s: float) -> None:
        super().__init__()
        self.sleep_s = sleep_s
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        if self.logger is not None:
            self.log("train_loss", loss)
        if batch_idx % 5 == 0:
            print(f"step={self.global_step} loss={loss.item():.5f}", flush=True)
        time.sleep(self.sleep_s)  # a slow data pipeline: the run lasts long enough to watch
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--csv", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.steps * 32, 64), torch.randn(args.steps * 32, 1))
    logger = CSVLogger(".", flush_logs_every_n_steps=10) if args.csv else False
    trainer = L.Trainer(
        accelerator="gpu",
        devices=1,
        max_steps=args.steps,
        max_epochs=1,
        logger=logger,
        log_every_n_steps=5,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    started = time.time()
    trainer.fit(Tiny(args.sleep), DataLoader(data, batch_size=32, shuffle=True))
    print(f"finished in {time.time() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()

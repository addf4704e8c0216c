"""A hand-written training loop of the common kind: logging `key=value`, printing `key: value`
and appending one JSON object per step; the loss blows up to NaN near the end.

Usage: python gen_generic.py OUT.jsonl > generic.log 2>&1
"""

from __future__ import annotations

import json
import logging
import sys
import time

import torch


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout
    )
    log = logging.getLogger("train")
    torch.manual_seed(0)
    x, y = torch.randn(256, 4), torch.randn(256, 1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with open(sys.argv[1], "w") as jsonl:
        for step in range(1, 31):
            if step == 25:  # a learning-rate blow-up, as happens
                for group in opt.param_groups:
                    group["lr"] = 1e12
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
            opt.step()
            record = {
                "step": step,
                "loss": loss.item(),
                "lr": opt.param_groups[0]["lr"],
                "grad_norm": grad_norm.item(),
                "time": time.time(),
            }
            jsonl.write(json.dumps(record) + "\n")
            if step % 5 == 0:
                log.info(
                    "step=%d loss=%.4f lr=%g grad_norm=%.3f",
                    step,
                    loss.item(),
                    opt.param_groups[0]["lr"],
                    grad_norm.item(),
                )
            if step % 10 == 0:
                print(
                    f"Epoch {step // 10} | val_loss: {loss.item() * 1.1:.4f} | "
                    f"val_acc: {0.5 + step / 100:.2%} | tokens/s: {12345.6 * step:,.1f}"
                )


if __name__ == "__main__":
    main()

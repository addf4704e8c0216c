"""Train a tiny timm model on CPU, logging the way timm's train.py does, and write summary.csv.

The console lines use train.py's `Train:` / `Test:` formats; the summary.csv comes from the
library's own `timm.utils.update_summary`, and logging from `timm.utils.setup_default_logging`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import OrderedDict

import timm
import torch
from timm.utils import AverageMeter, accuracy, setup_default_logging, update_summary

_logger = logging.getLogger("train")


def train_one_epoch(epoch, model, loader, opt, crit):
    losses_m, update_time_m, data_time_m = AverageMeter(), AverageMeter(), AverageMeter()
    updates_per_epoch = len(loader)
    start = time.time()
    for update_idx, (x, y) in enumerate(loader):
        data_time_m.update(time.time() - start)
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses_m.update(loss.item(), x.size(0))
        update_time_m.update(time.time() - start)
        if update_idx % 4 == 0 or update_idx == updates_per_epoch - 1:
            lr = opt.param_groups[0]["lr"]
            _logger.info(
                f"Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} "
                f"({100.0 * (update_idx + 1) / updates_per_epoch:>3.0f}%)]  "
                f"Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})  "
                f"Time: {update_time_m.val:.3f}s, {x.size(0) / update_time_m.val:>7.2f}/s  "
                f"({update_time_m.avg:.3f}s, {x.size(0) / update_time_m.avg:>7.2f}/s)  "
                f"LR: {lr:.3e}  "
                f"Data: {data_time_m.val:.3f} ({data_time_m.avg:.3f})"
            )
        start = time.time()
    return OrderedDict([("loss", losses_m.avg)])


def validate(model, loader, crit):
    batch_time_m, losses_m, top1_m, top5_m = (AverageMeter() for _ in range(4))
    last_idx = len(loader) - 1
    end = time.time()
    with torch.no_grad():
        for batch_idx, (x, y) in enumerate(loader):
            out = model(x)
            loss = crit(out, y)
            acc1, acc5 = accuracy(out, y, topk=(1, 5))
            losses_m.update(loss.item(), x.size(0))
            top1_m.update(acc1.item(), x.size(0))
            top5_m.update(acc5.item(), x.size(0))
            batch_time_m.update(time.time() - end)
            end = time.time()
            if batch_idx == last_idx or batch_idx % 2 == 0:
                _logger.info(
                    f"Test: [{batch_idx:>4d}/{last_idx}]  "
                    f"Time: {batch_time_m.val:.3f} ({batch_time_m.avg:.3f})  "
                    f"Loss: {losses_m.val:>7.3f} ({losses_m.avg:>6.3f})  "
                    f"Acc@1: {top1_m.val:>7.3f} ({top1_m.avg:>7.3f})  "
                    f"Acc@5: {top5_m.val:>7.3f} ({top5_m.avg:>7.3f})"
                )
    return OrderedDict([("loss", losses_m.avg), ("top1", top1_m.avg), ("top5", top5_m.avg)])


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    setup_default_logging()
    torch.manual_seed(0)
    model = timm.create_model("resnet10t", num_classes=10, pretrained=False)
    n_params = sum(p.numel() for p in model.parameters())
    _logger.info(f"Model resnet10t created, param count:{n_params}")
    x, y = torch.randn(96, 3, 32, 32), torch.randint(0, 10, (96,))
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:32], y[:32]), batch_size=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    for epoch in range(3):
        model.train()
        train_metrics = train_one_epoch(epoch, model, train, opt, crit)
        model.eval()
        eval_metrics = validate(model, val, crit)
        update_summary(
            epoch,
            train_metrics,
            eval_metrics,
            os.path.join(out, "summary.csv"),
            lr=opt.param_groups[0]["lr"],
        )
    _logger.info("*** Best metric: {} (epoch {})".format(eval_metrics["top1"], 2))


if __name__ == "__main__":
    main()

"""Train a tiny classifier with the torchvision classification reference's MetricLogger.

Usage: python gen_torchvision_ref.py VISION_CHECKOUT/references/classification

The loop mirrors the reference `train_one_epoch` / `evaluate` (same meters, headers and summary
line); the MetricLogger itself is imported from the given reference checkout.
"""

from __future__ import annotations

import sys
import time

import torch

sys.path.insert(0, sys.argv[1])
import utils  # noqa: E402  (torchvision references/classification/utils.py)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(320, 16)
    y = x[:, :10].argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    test = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:64], y[:64]), batch_size=8)
    for epoch in range(2):
        model.train()
        logger = utils.MetricLogger(delimiter="  ")
        logger.add_meter("lr", utils.SmoothedValue(window_size=1, fmt="{value}"))
        logger.add_meter("img/s", utils.SmoothedValue(window_size=10, fmt="{value}"))
        for image, target in logger.log_every(train, 10, f"Epoch: [{epoch}]"):
            start = time.time()
            loss = crit(model(image), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            acc1, acc5 = utils.accuracy(model(image), target, topk=(1, 5))
            logger.update(loss=loss.item(), lr=opt.param_groups[0]["lr"])
            logger.meters["acc1"].update(acc1.item(), n=image.shape[0])
            logger.meters["acc5"].update(acc5.item(), n=image.shape[0])
            logger.meters["img/s"].update(image.shape[0] / (time.time() - start))
        model.eval()
        logger = utils.MetricLogger(delimiter="  ")
        header = "Test: "
        with torch.inference_mode():
            for image, target in logger.log_every(test, 4, header):
                output = model(image)
                acc1, acc5 = utils.accuracy(output, target, topk=(1, 5))
                logger.update(loss=crit(output, target).item())
                logger.meters["acc1"].update(acc1.item(), n=image.shape[0])
                logger.meters["acc5"].update(acc5.item(), n=image.shape[0])
        print(f"{header} Acc@1 {logger.acc1.global_avg:.3f} Acc@5 {logger.acc5.global_avg:.3f}")


if __name__ == "__main__":
    main()

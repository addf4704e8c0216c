"""mmcv 1.x `EpochBasedRunner` with `TextLoggerHook` (the runner of mmdetection 2 and
mmsegmentation 0.x): a tiny per-pixel classifier, evaluated each epoch into the log buffer the
way their `EvalHook` does, so the work dir gets a real `.log` and `.log.json`.

Usage: MMCV_WITH_OPS=0 pip install mmcv==1.7.2; python gen_mmcv.py OUT_DIR
"""

from __future__ import annotations

import logging
import sys

import torch
from mmcv.runner import EpochBasedRunner, Hook
from mmcv.utils import get_logger


class Pixels(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 1)

    def train_step(self, batch, optimizer):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.conv(x), y)
        return {"loss": loss, "log_vars": {"loss": loss.item()}, "num_samples": len(x)}


class SegEval(Hook):
    """Mean IoU, pixel and mean class accuracy, put into the buffer as mmseg's EvalHook does."""

    def __init__(self, data) -> None:
        self.data = data

    def after_train_epoch(self, runner) -> None:
        x, y = self.data
        with torch.no_grad():
            pred = runner.model.conv(x).argmax(1)
        ious, accs = [], []
        for c in range(3):
            inter = ((pred == c) & (y == c)).sum().item()
            union = ((pred == c) | (y == c)).sum().item()
            ious.append(inter / union if union else 0.0)
            accs.append(inter / max((y == c).sum().item(), 1))
        results = {
            "aAcc": (pred == y).float().mean().item(),
            "mIoU": sum(ious) / 3,
            "mAcc": sum(accs) / 3,
        }
        runner.logger.info(" ".join(f"{k}: {v:.4f}" for k, v in results.items()))
        for name, value in results.items():
            runner.log_buffer.output[name] = value
        runner.log_buffer.ready = True


def main() -> None:
    work_dir = sys.argv[1]
    torch.manual_seed(0)
    x = torch.randn(64, 3, 8, 8)
    y = x.argmax(1)
    batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8)]
    model = Pixels()
    logger = get_logger("mmseg", log_file=f"{work_dir}/train.log", log_level=logging.INFO)
    runner = EpochBasedRunner(
        model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        work_dir=work_dir,
        logger=logger,
        max_epochs=3,
    )
    runner.register_training_hooks(
        lr_config=dict(policy="step", step=[2]),
        optimizer_config=dict(grad_clip=None),
        checkpoint_config=None,
        log_config=dict(interval=2, hooks=[dict(type="TextLoggerHook")]),
    )
    runner.register_hook(SegEval((x, y)), priority="LOW")
    runner.run([batches], [("train", 1)])


if __name__ == "__main__":
    main()

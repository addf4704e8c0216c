"""Drive detectron2's EventStorage, CommonMetricPrinter and JSONWriter with a tiny CPU loop.

Usage: python gen_detectron2.py DETECTRON2_CHECKOUT OUT_DIR

detectron2 is not on PyPI; this imports `detectron2.utils.events` from a source checkout (it needs
fvcore) and feeds it losses the way `SimpleTrainer.run_step` does, then the evaluation results
the way `DefaultTrainer` does, and prints `print_csv_format`'s copypaste lines. The log prefix
is the one `detectron2.utils.logger.setup_logger` gives on a console.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import torch

sys.path.insert(0, sys.argv[1])
from detectron2.utils.events import CommonMetricPrinter, EventStorage, JSONWriter  # noqa: E402

MAX_ITER = 60


class _Abbreviated(logging.Formatter):
    """setup_logger(abbrev_name="d2") shows `detectron2.x` loggers as `d2.x`."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        record.name = record.name.replace("detectron2.", "d2.")
        return super().formatMessage(record)


def main() -> None:
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        _Abbreviated("[%(asctime)s %(name)s]: %(message)s", datefmt="%m/%d %H:%M:%S")
    )
    for name in ("detectron2", "d2"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    log = logging.getLogger("d2.evaluation.testing")
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    writers = [CommonMetricPrinter(MAX_ITER), JSONWriter(os.path.join(out, "metrics.json"))]
    x, y = torch.randn(64, 16), torch.randint(0, 5, (64,))
    with EventStorage(0) as storage:
        for it in range(MAX_ITER):
            start = time.perf_counter()
            data_time = time.perf_counter() - start
            logits = model(x)
            loss_cls = torch.nn.functional.cross_entropy(logits, y)
            loss_box_reg = 0.5 * logits.pow(2).mean()
            losses = loss_cls + loss_box_reg
            opt.zero_grad()
            losses.backward()
            opt.step()
            storage.put_scalars(
                total_loss=losses.item(),
                loss_cls=loss_cls.item(),
                loss_box_reg=loss_box_reg.item(),
                data_time=data_time,
            )
            storage.put_scalar("fast_rcnn/cls_accuracy", (logits.argmax(1) == y).float().mean())
            storage.put_scalar("lr", opt.param_groups[0]["lr"], smoothing_hint=False)
            storage.put_scalar("time", time.perf_counter() - start + 0.01)
            if (it + 1) % 20 == 0 or it == MAX_ITER - 1:
                if it == MAX_ITER - 1:
                    results = {
                        "AP": 0.0,
                        "AP50": 0.0,
                        "AP75": 0.0,
                        "APs": float("nan"),
                        "APm": 0.0,
                        "APl": 0.0,
                    }
                    log.info("copypaste: Task: bbox")
                    log.info("copypaste: " + ",".join(results))
                    log.info("copypaste: " + ",".join(f"{v:.4f}" for v in results.values()))
                    storage.put_scalars(
                        **{f"bbox/{k}": v for k, v in results.items()}, smoothing_hint=False
                    )
                for w in writers:
                    w.write()
            storage.step()


if __name__ == "__main__":
    main()

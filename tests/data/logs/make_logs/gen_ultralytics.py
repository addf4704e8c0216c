"""Train a tiny YOLO (from a model yaml, no weights) for two epochs on generated boxes, on CPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def make_dataset(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for split, n in (("train", 16), ("val", 8)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            img = np.full((64, 64, 3), 200, np.uint8)
            x0, y0 = rng.integers(4, 32, 2)
            w, h = rng.integers(12, 28, 2)
            img[y0 : y0 + h, x0 : x0 + w] = (30, 60, 220)
            Image.fromarray(img).save(root / "images" / split / f"{i}.png")
            cx, cy = (x0 + w / 2) / 64, (y0 + h / 2) / 64
            (root / "labels" / split / f"{i}.txt").write_text(f"0 {cx} {cy} {w / 64} {h / 64}\n")
    data = root / "data.yaml"
    data.write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: box\n")
    return data


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    os.environ["YOLO_OFFLINE"] = "1"
    from ultralytics import YOLO, settings

    settings.update({"sync": False})
    data = make_dataset(out / "data")
    model = YOLO("yolov8n.yaml")
    model.train(
        data=str(data),
        epochs=int(os.environ.get("EPOCHS", "2")),
        imgsz=64,
        batch=8,
        device="cpu",
        workers=0,
        plots=False,
        amp=False,
        project=str(out / "runs"),
        name="train",
        exist_ok=True,
        val=True,
    )


if __name__ == "__main__":
    main()

"""Real failure output on a CPU machine: a torchvision weights download attempt without network
(`Downloading: ...` then the traceback) and a CPU allocation failure.

Usage: python gen_failures.py download|oom
"""

from __future__ import annotations

import sys

import torch


def main() -> None:
    if sys.argv[1] == "download":
        import torchvision

        torchvision.models.resnet18(weights="DEFAULT")
    else:
        torch.empty(10**13, dtype=torch.uint8)


if __name__ == "__main__":
    main()

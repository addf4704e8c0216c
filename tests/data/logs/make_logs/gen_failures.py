"""Real failure output on a CPU machine: a torchvision weights download that cannot connect
(`Downloading: ...` then the traceback) and a CPU allocation failure.

The download goes through a proxy on a closed loopback port, so nothing leaves the machine.

Usage: python gen_failures.py download|oom
"""

from __future__ import annotations

import os
import sys

import torch


def main() -> None:
    if sys.argv[1] == "download":
        for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
            os.environ[name] = "http://127.0.0.1:9"
        os.environ.pop("no_proxy", None)
        os.environ.pop("NO_PROXY", None)
        import torchvision

        torchvision.models.resnet18(weights="DEFAULT")
    else:
        torch.empty(10**13, dtype=torch.uint8)


if __name__ == "__main__":
    main()

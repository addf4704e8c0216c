"""A hand-written loop that keeps its history in a list of dicts and saves it with pandas'
`DataFrame.to_csv()`, whose default index column has an empty header cell.

Validation runs every other epoch; the other rows get `None`, which pandas writes as an
empty cell.

Usage: python gen_pandas_csv.py OUT.csv
"""

from __future__ import annotations

import math
import sys

import pandas as pd


def main() -> None:
    history = []
    for epoch in range(6):
        train_loss = 2.3 * math.exp(-0.4 * epoch)
        history.append(
            {
                "epoch": epoch,
                "step": (epoch + 1) * 50,
                "train_loss": round(train_loss, 4),
                "val_loss": round(train_loss * 1.1, 4) if epoch % 2 else None,
                "val_acc": round(0.1 + 0.12 * epoch, 3) if epoch % 2 else None,
                "lr": 0.01 * 0.5**epoch,
            }
        )
    pd.DataFrame(history).to_csv(sys.argv[1])


if __name__ == "__main__":
    main()

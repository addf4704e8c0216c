"""Write real tqdm progress output: it/s and s/it bars, a postfix loss, a total-less bar."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm, trange

# fast loop -> it/s, with a postfix like most training loops set
bar = tqdm(range(40), desc="Epoch 1", file=sys.stderr, mininterval=0)
for i in bar:
    time.sleep(0.005)
    bar.set_postfix(loss=2.5 / (i + 1), lr=1e-4)
bar.close()
# slow loop -> s/it
for _ in trange(3, desc="eval", file=sys.stderr, mininterval=0):
    time.sleep(1.2)
# unknown total, with a postfix string and a nan loss
bar = tqdm(desc="train", file=sys.stderr, mininterval=0, unit="batch")
for i in range(5):
    time.sleep(0.01)
    bar.set_postfix_str(f"loss={float('nan') if i == 3 else 0.5:.3f}, acc=0.{i}1")
    bar.update(1)
bar.close()

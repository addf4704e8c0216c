"""A tiny character-level GPT loop on CPU that prints what nanoGPT's train.py prints.

nanoGPT is a script, not a package, so this follows its train loop: the same start-up lines,
`step N: train loss ..., val loss ...` evaluations, `iter N: loss ..., time ...ms, mfu ...%`
lines (with its -100.00% mfu before five local iterations), and checkpoint messages.
"""

from __future__ import annotations

import time

import torch

BLOCK, BATCH, EVAL_ITERS = 16, 8, 4


def main() -> None:
    torch.manual_seed(1337)
    text = "".join(f"to be or not to be, line {i}. " for i in range(400))
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    train, val = data[: int(0.9 * len(data))], data[int(0.9 * len(data)) :]
    print(f"tokens per iteration will be: {BATCH * BLOCK:,}")
    print(f"found vocab_size = {len(chars)} (inside data/shakespeare_char/meta.pkl)")
    print("Initializing a new model from scratch")
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, dropout=0.0)
    model = torch.nn.ModuleDict(
        {
            "emb": torch.nn.Embedding(len(chars), 32),
            "pos": torch.nn.Embedding(BLOCK, 32),
            "block": layer,
            "head": torch.nn.Linear(32, len(chars)),
        }
    )
    n_params = sum(p.numel() for p in model.parameters())
    print(f"number of parameters: {n_params / 1e6:.2f}M")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    print("using fused AdamW: False")
    mask = torch.nn.Transformer.generate_square_subsequent_mask(BLOCK)

    def batch(split: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(split) - BLOCK - 1, (BATCH,))
        x = torch.stack([split[i : i + BLOCK] for i in ix])
        return x, torch.stack([split[i + 1 : i + 1 + BLOCK] for i in ix])

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = model["emb"](x) + model["pos"](torch.arange(BLOCK))
        logits = model["head"](model["block"](h, src_mask=mask, is_causal=True))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())

    best, running_mfu, t0 = 1e9, -1.0, time.time()
    for iter_num in range(61):
        if iter_num % 20 == 0:
            with torch.no_grad():
                losses = {
                    s: torch.stack([loss_of(*batch(d)) for _ in range(EVAL_ITERS)]).mean()
                    for s, d in (("train", train), ("val", val))
                }
            print(
                f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
            )
            if losses["val"] < best:
                best = losses["val"]
                if iter_num > 0:
                    print("saving checkpoint to out-shakespeare-char")
        loss = loss_of(*batch(train))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t1 = time.time()
        dt, t0 = t1 - t0, t1
        if iter_num % 5 == 0:
            if iter_num >= 5:
                mfu = 6 * n_params * BATCH * BLOCK / dt / 312e12
                running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
            print(
                f"iter {iter_num}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms, "
                f"mfu {running_mfu * 100:.2f}%"
            )


if __name__ == "__main__":
    main()

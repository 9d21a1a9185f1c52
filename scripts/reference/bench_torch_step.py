#!/usr/bin/env python3
"""PyTorch eager baseline of `zaya bench step`: the same model trained the same way, in float32.

The model is the PyTorch twin (zaya_twin.py, a plain nn.Module implementation of ZAYA1: explicit
T×T attention scores, a Python loop over experts) built from the same config.json; the step is
what zaya's trainer does with `--optimizer adamw`: forward, mean cross-entropy, backward, global
grad-norm clipping at 1.0, torch.optim.AdamW (β = (0.9, 0.95), ε = 1e-8, weight decay 0.1 on
matrices only). Tokens are uniform random. Prints one JSON object: tokens/s (median over the timed
steps) and the step times. A benchmark, not a test: run it beside `zaya bench step` (make
bench-step runs both interleaved and prints the ratio).

usage: bench_torch_step.py [--config configs/models/step-bench.json] [--batch 2] [--seq-len 512]
                           [--steps 4] [--warmup 1] [--threads 2] [--seed 1]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zaya_twin import ZayaTwin  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/models/step-bench.json")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.batch < 1 or a.seq_len < 2 or a.threads < 1:
        ap.error("--steps, --batch, --threads must be >= 1, --seq-len >= 2, --warmup >= 0")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    with open(a.config) as f:
        cfg = json.load(f)
    model = ZayaTwin(cfg, dtype=torch.float32)
    decay, no_decay = [], []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:  # matrices (and conv weights): random normal, decayed
                p.normal_(0.0, 0.02)
                (decay if p.dim() == 2 else no_decay).append(p)
            else:
                no_decay.append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    vocab = cfg["vocab_size"]
    gen = torch.Generator().manual_seed(a.seed)

    def step():
        windows = torch.randint(0, vocab, (a.batch, a.seq_len + 1), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = model.train_loss(windows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss)

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    tokens = a.batch * a.seq_len
    print(json.dumps({
        "impl": "pytorch-eager", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "config": a.config, "batch": a.batch, "seq_len": a.seq_len, "steps": a.steps,
        "tokens_per_s": statistics.median(tokens / t for t in times),
        "step_seconds": times,
    }))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Generate the optimizer test vectors in tests/fixtures/optim/<case>/ (float64 twin + optim_twin.py).

Run from anywhere:  /usr/bin/python3 scripts/reference/make_optim_vectors.py [--out DIR]

Each case directory holds
  config.json, model.safetensors   the initial model (copied from tests/fixtures/model/<source>/)
  tokens.txt                       `steps` batches of B windows of T tokens (batch k = lines
                                   k*B ... k*B+B-1); the model reads each window's first T-1
                                   tokens and predicts the T-1 after its first (the trainer's step)
  meta.json                        B, steps, the schedule and the OptimizerConfig fields of each run
  expected.safetensors             for each run r in (adamw, muon):
                                     r.loss F64 [steps+1]: loss of batch k before update k, then the
                                       loss of batch 0 after the last update
                                     r.grad_norm F64 [steps]: pre-clip global gradient norms
                                     r/<name> F32: every tensor (incl. balancing_biases) at the end
A step is: forward over the windows' first T-1 tokens + backward of the mean loss against the next
tokens, routing counts (over B*(T-1) tokens), clip, update with lr = schedule(k),
balancing-bias update from the counts. Token seeds are retried until every routing decision of both
runs has a biased-score margin >= MIN_MARGIN (so f32 arithmetic routes identically).
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from optim_twin import TwinOptimizer, routing_counts, schedule_lr  # noqa: E402
from zaya_twin import ZayaTwin  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "optim")
MIN_MARGIN = 1e-3

SCHEDULE = dict(kind="cosine", warmup=2, total=5, peak=2e-2, floor=2e-3)
COMMON = dict(weight_decay=0.1, grad_clip=1.0, balance_lr=1e-2)
RUNS = {"adamw": dict(COMMON, use_muon=False), "muon": dict(COMMON, use_muon=True)}
CASES = [dict(name="tiny_a", source="tiny_a", B=2, T=9, steps=5)]


def min_margin(model):
    worst = float("inf")
    for i, rt in model.routing().items():
        bb = model.model.layers[i].zaya_block.router.balancing_biases.to(torch.float64)
        s = rt["p"].to(torch.float64) + bb
        top2 = s.topk(2, dim=-1).values
        worst = min(worst, float((top2[..., 0] - top2[..., 1]).min()))
    return worst


def run(cfg, weights, batches, opt_cfg):
    model = ZayaTwin(cfg, dtype=torch.float64)
    model.load_tensors(weights)
    opt = TwinOptimizer(model, **opt_cfg)
    losses, norms, margin = [], [], float("inf")
    for k, tok in enumerate(batches):
        model.zero_grad(set_to_none=True)
        loss = model.train_loss(tok)
        loss.backward()
        margin = min(margin, min_margin(model))
        counts = routing_counts(model)
        losses.append(float(loss))
        norms.append(opt.step(schedule_lr(k, **SCHEDULE)))
        opt.update_balancing_biases(counts)
    with torch.no_grad():
        losses.append(float(model.train_loss(batches[0])))
    margin = min(margin, min_margin(model))
    return model, losses, norms, margin


def build_case(case, out_root):
    src = os.path.join(REPO, "tests", "data", "model", case["source"])
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    weights = st.load(os.path.join(src, "model.safetensors"))
    V, B, T, S = cfg["vocab_size"], case["B"], case["T"], case["steps"]
    for attempt in range(200):
        gen = torch.Generator().manual_seed(4242 + attempt)
        tokens = torch.randint(0, V, (S * B, T), generator=gen)
        batches = [tokens[k * B:(k + 1) * B] for k in range(S)]
        results = {r: run(cfg, weights, batches, oc) for r, oc in RUNS.items()}
        margin = min(res[3] for res in results.values())
        clipped = all(any(n > COMMON["grad_clip"] for n in res[2]) for res in results.values())
        if margin >= MIN_MARGIN and clipped:
            break
    else:
        raise RuntimeError("no token seed gave routing margins >= MIN_MARGIN")

    d = os.path.join(out_root, case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for f in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(src, f), os.path.join(d, f))
    with open(os.path.join(d, "tokens.txt"), "w") as f:
        for row in tokens.tolist():
            f.write(" ".join(str(x) for x in row) + "\n")
    exp = {}
    for r, (model, losses, norms, _) in results.items():
        exp[f"{r}.loss"] = torch.tensor(losses, dtype=torch.float64)
        exp[f"{r}.grad_norm"] = torch.tensor(norms, dtype=torch.float64)
    for r, (model, *_rest) in results.items():
        for n, t in model.named_tensors().items():
            exp[f"{r}/{n}"] = t.detach().to(torch.float32)
    st.save(os.path.join(d, "expected.safetensors"), exp)
    meta = {
        "case": case["name"], "source": f"tests/fixtures/model/{case['source']}", "B": B, "T": T,
        "steps": S, "seed": 4242 + attempt, "schedule": SCHEDULE, "runs": RUNS,
        "generator": "scripts/reference/make_optim_vectors.py (float64, optim_twin.py)",
        "min_routing_margin": margin,
        "losses": {r: res[1] for r, res in results.items()},
        "grad_norms": {r: res[2] for r, res in results.items()},
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
    print(f"{case['name']}: seed {4242 + attempt} margin {margin:.2e} size {size}")
    for r, res in results.items():
        print(f"  {r:6s} losses {[round(x, 6) for x in res[1]]} norms {[round(x, 3) for x in res[2]]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for case in CASES:
        build_case(case, args.out)


if __name__ == "__main__":
    main()

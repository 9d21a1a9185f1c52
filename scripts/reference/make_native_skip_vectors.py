"""Expected values of the skip_e case under transformers' native ZAYA semantics (a token routed to
the skip class outputs 0 instead of p·x; docs/checkpoint-layouts.md): the float64 twin on the same
weights and tokens with ZayaBlock.skip_outputs_zero set. Writes
tests/fixtures/model/skip_e/expected_native.safetensors (same format as expected.safetensors).

    /usr/bin/python3 scripts/reference/make_native_skip_vectors.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from make_vectors import evaluate, read_tokens  # noqa: E402
from zaya_twin import ZayaBlock, ZayaTwin  # noqa: E402

CASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "model",
                    "skip_e")


def main():
    with open(os.path.join(CASE, "config.json")) as f:
        cfg = json.load(f)
    ZayaBlock.skip_outputs_zero = True
    model = ZayaTwin(cfg, dtype=torch.float64)
    model.load_tensors(st.load(os.path.join(CASE, "model.safetensors")))
    tokens = read_tokens(os.path.join(CASE, "tokens.txt"))
    logits, loss, grads = evaluate(model, tokens)
    out = {"loss": loss.reshape(1), "logits": logits.to(torch.float32)}
    for n, g in grads.items():
        out[n] = g.to(torch.float32)
    st.save(os.path.join(CASE, "expected_native.safetensors"), out)
    print(f"native loss {float(loss):.8f}")


if __name__ == "__main__":
    main()

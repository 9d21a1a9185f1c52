"""Expected values of twin cases under transformers' native ZAYA semantics (a token routed to the
skip class outputs 0 instead of p·x; docs/checkpoint-layouts.md): the float64 twin on the case's
weights and tokens with ZayaBlock.skip_outputs_zero set. Writes <case>/expected_native.safetensors
(the format of expected.safetensors) for each case directory given, by default the two whose
skip class wins for some tokens: tests/fixtures/model/skip_e and tests/fixtures/model_swa/swa_k
(sliding-window layers, one window: the native schema can hold it).

    /usr/bin/python3 scripts/reference/make_native_vectors.py [CASE_DIR ...]
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from make_vectors import evaluate, read_tokens  # noqa: E402
from zaya_twin import ZayaBlock, ZayaTwin  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")
DEFAULT_CASES = [os.path.join(FIXTURES, "model", "skip_e"), os.path.join(FIXTURES, "model_swa", "swa_k")]


def write_native(case):
    with open(os.path.join(case, "config.json")) as f:
        cfg = json.load(f)
    ZayaBlock.skip_outputs_zero = True
    try:
        model = ZayaTwin(cfg, dtype=torch.float64)
        model.load_tensors(st.load(os.path.join(case, "model.safetensors")))
        tokens = read_tokens(os.path.join(case, "tokens.txt"))
        logits, loss, grads = evaluate(model, tokens)
    finally:
        ZayaBlock.skip_outputs_zero = False
    out = {"loss": loss.reshape(1), "logits": logits.to(torch.float32)}
    for n, g in grads.items():
        out[n] = g.to(torch.float32)
    st.save(os.path.join(case, "expected_native.safetensors"), out)
    print(f"{os.path.basename(os.path.normpath(case))}: native loss {float(loss):.8f}")


def main():
    torch.set_num_threads(1)  # deterministic reductions, as make_vectors.py
    for case in sys.argv[1:] or DEFAULT_CASES:
        write_native(case)


if __name__ == "__main__":
    main()

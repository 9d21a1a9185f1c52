#!/usr/bin/python3
"""Generate the ZAYA1 model test vectors in tests/fixtures/model/<case>/.

Run from anywhere:  /usr/bin/python3 scripts/reference/make_vectors.py  [--out DIR] [--only CASE ...]
(cases with sliding-window layers go to tests/fixtures/model_swa/<case>/ unless --out is given)

Each case directory holds
  config.json          full S1-schema config (docs/model.md §1, like §12.2)
  model.safetensors    every parameter + balancing_biases buffer, F32
  tokens.txt           B lines of T space-separated token ids (contains pad ids 0)
  expected.safetensors logits F32 [B,T,V], loss F64 [1], and the gradient (F32) of the loss for every
                       trainable parameter under the parameter's own name
  meta.json            informational: description, routing counts per MoE sub-layer, smallest
                       routing margin, and how close an f32 evaluation of the same twin lands

Expected values come from the float64 twin (zaya_twin.py) evaluated on the f32-rounded weights,
i.e. exactly the weights stored in model.safetensors.
"""
import argparse
import copy
import json
import math
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from zaya_twin import ZayaTwin, init_random_test_  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "model")
# Cases with sliding-window layers (docs/model.md §4.9): read by tests/model/test_attention_window.cpp.
DEFAULT_OUT_SWA = os.path.join(REPO, "tests", "fixtures", "model_swa")
BASE_SEED = 20250601
MIN_MARGIN = 2e-3  # smallest allowed gap between the best and second-best biased router score

# The §12.2 tiny config; cases override fields.
TEMPLATE = {
    "architectures": ["ZayaForCausalLM"],
    "model_type": "zaya",
    "activation_func": "swiglu",
    "activation_func_fp8_input_store": False,
    "add_bias_linear": False,
    "apply_rope_fusion": True,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bias_activation_fusion": True,
    "bos_token_id": 2,
    "cca": True,
    "cca_num_q_heads": [4, 0, 4, 0],
    "eos_token_id": 1,
    "ffn_hidden_size_list": [0, 128, 0, 128],
    "fused_add_norm": False,
    "gated_linear_unit": True,
    "hidden_size": 64,
    "kv_channels": 8,
    "lm_head_bias": False,
    "max_position_embeddings": 2048,
    "moe_router_topk": 1,
    "norm_epsilon": 1e-05,
    "normalization": "RMSNorm",
    "num_attention_heads": 8,
    "num_hidden_layers": 4,
    "num_key_value_heads": 2,
    "num_query_groups_list": [2, 0, 2, 0],
    "pad_token_id": 0,
    "partial_rotary_factor": 0.5,
    "residual_in_fp32": False,
    "rope_scaling": False,
    "rope_theta": 10000,
    "scale_residual_merge": True,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
    "transformers_version": "4.57.1",
    "use_cache": True,
    "vocab_size": 512,
    "zaya_high_prec": True,
    "zaya_layers": ["a", 4, "a", 4],
    "zaya_mlp_expansion": [0, 32, 0, 32],
    "zaya_use_eda": True,
    "zaya_use_mod": True,
}


def make_config(D, Nh, Hk, layers, F, R, V, eps=1e-5, theta=10000, prf=0.5, mod=True, eda=True):
    """F, R: one value per MoE sub-layer (in order) or a single int for all."""
    cfg = copy.deepcopy(TEMPLATE)
    moe = [i for i, l in enumerate(layers) if l != "a"]
    F = [F] * len(moe) if isinstance(F, int) else list(F)
    R = [R] * len(moe) if isinstance(R, int) else list(R)
    assert len(F) == len(moe) and len(R) == len(moe)
    Fl = [0] * len(layers)
    Rl = [0] * len(layers)
    for j, i in enumerate(moe):
        Fl[i], Rl[i] = F[j], R[j]
    cfg.update({
        "hidden_size": D,
        "num_attention_heads": Nh,
        "num_key_value_heads": Hk,
        "kv_channels": D // Nh,
        "zaya_layers": list(layers),
        "num_hidden_layers": len(layers),
        "cca_num_q_heads": [Nh // 2 if l == "a" else 0 for l in layers],
        "num_query_groups_list": [Hk if l == "a" else 0 for l in layers],
        "ffn_hidden_size_list": Fl,
        "zaya_mlp_expansion": Rl,
        "vocab_size": V,
        "norm_epsilon": eps,
        "rope_theta": theta,
        "partial_rotary_factor": prf,
        "zaya_use_mod": mod,
        "zaya_use_eda": eda,
    })
    return cfg


def with_windows(cfg, windows, swa_theta):
    """The config with sliding-window CCA layers (legacy-schema names: one window per sub-layer in
    `swa_layers`, 0 = full attention, and the windowed layers' RoPE theta `swa_rotary_base`)."""
    cfg = copy.deepcopy(cfg)
    cfg["swa_layers"] = list(windows)
    cfg["swa_rotary_base"] = swa_theta
    return cfg


# name, description, config, B, T, balancing-bias overrides {layer: {class: value}}, requirements
CASES = [
    dict(name="tiny_a",
         desc="(a) §12.2-like shape: D=64, 8 heads (d=8), H_q=4, H_k=2 (G=2), r=4, layers [a,4,a,4], "
              "4 experts + skip, EDA + MoD on",
         cfg=make_config(64, 8, 2, ["a", 4, "a", 4], F=16, R=16, V=96),
         B=2, T=9),
    dict(name="hk3_b",
         desc="(b) D=96, 12 heads (d=8), H_q=6, H_k=3 (G=2): value head 1 straddles the current/previous "
              "halves; partial_rotary_factor 0.75 (r=6); expert counts 3 and 2 with widths 16 and 8",
         cfg=make_config(96, 12, 3, ["a", 3, "a", 2], F=[16, 8], R=12, V=48, prf=0.75),
         B=3, T=7),
    dict(name="gqa4_c",
         desc="(c) GQA group size 4 like ZAYA1-base: D=128, 16 heads (d=8), H_q=8, H_k=2, "
              "partial_rotary_factor 0.5 (r=4), rope_theta 1e6, longer T, layers [a,2]",
         cfg=make_config(128, 16, 2, ["a", 2], F=8, R=8, V=48, theta=1000000),
         B=2, T=29),
    dict(name="odd_d",
         desc="(d) odd number of sub-layers ending in attention [a,2,a,8,a]; expert counts 2 and 8, "
              "ffn widths 24 and 16; D=48, 6 heads (d=8), H_q=3, H_k=1 (G=3, one value head = both halves)",
         cfg=make_config(48, 6, 1, ["a", 2, "a", 8, "a"], F=[24, 16], R=8, V=96),
         B=2, T=13, require=["empty_expert"]),
    dict(name="skip_e",
         desc="(e) skip (MoD) class selected for some tokens: sub-layer 1's stored skip bias is +0.3; "
              "sub-layer 3's expert 0 has bias -1 so it receives no token (zero gradient); "
              "D=32, 4 heads (d=8), H_q=2, H_k=1 (G=2)",
         cfg=make_config(32, 4, 1, ["a", 4, "a", 4], F=16, R=8, V=64),
         B=3, T=9, bias={1: {4: 0.3}, 3: {0: -1.0}},
         require=["skip_selected", "empty_expert"]),
    dict(name="nomod_eps_f",
         desc="(f)+(g) zaya_use_mod false (K = n router classes, no skip) and norm_epsilon 0.1 "
              "(router RMSNorm eps = norm_epsilon is visible); D=32, 4 heads, H_q=2, H_k=2 (G=1)",
         cfg=make_config(32, 4, 2, ["a", 3, "a", 3], F=[16, 32], R=8, V=64, eps=0.1, mod=False),
         B=2, T=11, require=["c1_visible"]),
    dict(name="noeda_g",
         desc="(f)+(g) zaya_use_eda false (no router_states_scale anywhere, router widths 8/12/6 differ), "
              "norm_epsilon 1e-2, 6 sub-layers [a,3,a,5,a,2] ending in MoE; D=32, H_q=2, H_k=1",
         cfg=make_config(32, 4, 1, ["a", 3, "a", 5, "a", 2], F=[16, 8, 24], R=[8, 12, 6], V=64,
                         eps=1e-2, eda=False),
         B=3, T=7, require=["c1_visible"]),
    dict(name="t2_h",
         desc="T=2 (shortest valid sequence); full rotary (partial_rotary_factor 1.0, r=d=8); "
              "D=32, H_q=2, H_k=2",
         cfg=make_config(32, 4, 2, ["a", 4, "a", 4], F=16, R=8, V=48, prf=1.0),
         B=3, T=2),
    dict(name="swa_i",
         desc="sliding-window CCA layers (docs/model.md §4.9) mixed with full ones, windows [3,-,1,-,0] "
              "(W=3 < T, W=1: a query sees only itself, full), swa_rotary_base 500 vs rope_theta 1e4; "
              "D=32, 4 heads (d=8), H_q=2, H_k=1 (G=2), odd T",
         cfg=with_windows(make_config(32, 4, 1, ["a", 4, "a", 4, "a"], F=16, R=8, V=64),
                          [3, 0, 1, 0, 0], 500.0),
         B=2, T=11),
    dict(name="swa_j",
         desc="windows larger and smaller than T [20,-,5,-] with GQA group 4 (D=64, 8 heads, H_q=4, "
              "H_k=1), rope_theta 5e6 for full layers and 1e4 for windowed ones (the 74B's defaults)",
         cfg=with_windows(make_config(64, 8, 1, ["a", 3, "a", 3], F=16, R=8, V=48, theta=5000000),
                          [20, 0, 5, 0], 10000.0),
         B=2, T=13),
    dict(name="swa_k",
         desc="one window for every windowed layer, as the native schema's single sliding_window "
              "gives it, so the case converts to the native layout: windows [4,-,0,-,4,-] "
              "(pairs sliding, full, sliding), swa_rotary_base 1e4 vs rope_theta 5e6; the skip class "
              "wins for some tokens (sub-layer 1's skip bias +0.3), so the native semantics differ "
              "(expected_native.safetensors, scripts/reference/make_native_vectors.py); D=32, "
              "4 heads (d=8), H_q=2, H_k=1 (G=2)",
         cfg=with_windows(make_config(32, 4, 1, ["a", 4, "a", 4, "a", 4], F=16, R=8, V=64,
                                      theta=5000000),
                          [4, 0, 0, 0, 4, 0], 10000.0),
         B=2, T=11, bias={1: {4: 0.3}}, require=["skip_selected"]),
]


def make_tokens(gen, B, T, V):
    tok = torch.randint(3, V, (B, T), generator=gen)
    # pad ids (0) as inputs and as targets; special ids 1/2 as ordinary tokens too
    tok[0, T - 1] = 0
    tok[B - 1, 0] = 0
    if T >= 5:
        tok[0, T // 2] = 0
        tok[B - 1, T - 3] = 0
        tok[B - 1, T - 2] = 0
        tok[0, 1] = 2
        tok[B - 1, 2] = 1
    return tok


def routing_stats(model):
    stats = {}
    min_margin = float("inf")
    for i, rt in model.routing().items():
        p, choice = rt["p"], rt["choice"]
        bb = model.model.layers[i].zaya_block.router.balancing_biases.to(torch.float64)
        s = p.to(torch.float64) + bb
        top2 = s.topk(2, dim=-1).values if s.shape[-1] > 1 else torch.cat([s, s - 1], -1)
        min_margin = min(min_margin, (top2[..., 0] - top2[..., 1]).min().item())
        assert torch.equal(s.argmax(-1), choice), "f32 router choice differs from float64 choice"
        K = p.shape[-1]
        stats[i] = torch.bincount(choice.reshape(-1), minlength=K).tolist()
    return stats, min_margin


def grads_of(model):
    out = {}
    for n, p in model.named_parameters():
        out[n] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    return out


def evaluate(model, tokens):
    model.zero_grad(set_to_none=True)
    logits = model(tokens)
    loss = model.loss(tokens, logits)
    loss.backward()
    return logits.detach(), loss.detach(), grads_of(model)


def build_case(case, out_root):
    cfg = case["cfg"]
    B, T = case["B"], case["T"]
    V = cfg["vocab_size"]
    req = case.get("require", [])
    for attempt in range(1000):
        seed = BASE_SEED + 1000 * CASES.index(case) + attempt
        gen = torch.Generator().manual_seed(seed)
        model = ZayaTwin(cfg, dtype=torch.float64)
        model.check_names()
        init_random_test_(model, gen)
        with torch.no_grad():
            for li, ov in case.get("bias", {}).items():
                bb = model.model.layers[li].zaya_block.router.balancing_biases
                for k, v in ov.items():
                    bb[k] = v
        model.round_to_f32_()
        tokens = make_tokens(gen, B, T, V)
        logits, loss, grads = evaluate(model, tokens)
        stats, margin = routing_stats(model)
        ok = margin >= MIN_MARGIN
        c = model.config
        if ok and "skip_selected" in req:
            # some layer where skip is chosen for some but not all tokens, and real experts too
            ok = any(c.use_mod and 0 < cnt[-1] < B * T and sum(x > 0 for x in cnt[:-1]) >= 2
                     for cnt in stats.values())
        if ok and "empty_expert" in req:
            ok = any(0 in cnt[:c.n_experts[i]] for i, cnt in stats.items())
        # non-degenerate routing in every MoE layer: >= min(3, n) classes used, none takes > 65%
        ok = ok and all(sum(x > 0 for x in cnt) >= min(3, c.n_experts[i]) and max(cnt) <= 0.65 * B * T
                        for i, cnt in stats.items())
        if ok:
            break
    else:
        raise RuntimeError(f"{case['name']}: no seed satisfied the requirements")

    # empty experts must have exactly zero gradient
    for i, cnt in stats.items():
        for e in range(c.n_experts[i]):
            pre = f"model.layers.{i}.zaya_block.experts.local_experts.{e}."
            z = all(float(grads[pre + w].abs().max()) == 0.0 for w in ("linear_fc1.weight", "linear_fc2.weight"))
            assert z == (cnt[e] == 0), (case["name"], i, e, cnt)

    info = {}
    if "c1_visible" in req:
        alt = ZayaTwin(cfg, dtype=torch.float64, router_eps=1e-6)
        alt.load_tensors(model.named_tensors())
        with torch.no_grad():
            la = alt(tokens)
        rel = float((la - logits).abs().max() / logits.abs().max())
        info["c1_logit_change_if_router_eps_1e-6"] = rel
        assert rel > 1e-3, f"router eps = norm_epsilon not visible enough: {rel}"

    # f32 evaluation of the same weights: how close does plain f32 arithmetic land?
    m32 = ZayaTwin(cfg, dtype=torch.float32)
    m32.load_tensors(model.named_tensors())
    l32, s32, g32 = evaluate(m32, tokens)
    stats32, _ = routing_stats(m32)
    assert stats32 == stats, "f32 twin routed differently"
    worst = 0.0
    for n in grads:
        den = float(grads[n].norm())
        num = float((g32[n].double() - grads[n]).norm())
        worst = max(worst, num / den if den > 0 else num)
    info.update({
        "f32_twin_logits_maxerr_over_maxabs": float((l32.double() - logits).abs().max() / logits.abs().max()),
        "f32_twin_loss_abserr": abs(float(s32) - float(loss)),
        "f32_twin_worst_grad_rel_l2": worst,
    })

    # ---- write files ----
    d = os.path.join(out_root, case["name"])
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    weights = {n: t.detach().to(torch.float32) for n, t in model.named_tensors().items()}
    st.save(os.path.join(d, "model.safetensors"), weights)
    with open(os.path.join(d, "tokens.txt"), "w") as f:
        for row in tokens.tolist():
            f.write(" ".join(str(x) for x in row) + "\n")
    # loss (F64) first so that it is 8-byte aligned in the file
    exp = {"loss": loss.reshape(1).to(torch.float64), "logits": logits.to(torch.float32)}
    for n, g in grads.items():
        exp[n] = g.to(torch.float32)
    st.save(os.path.join(d, "expected.safetensors"), exp)

    c = model.config
    meta = {
        "case": case["name"],
        "description": case["desc"],
        "B": B, "T": T, "seed": seed,
        "generator": "scripts/reference/make_vectors.py (float64 twin scripts/reference/zaya_twin.py)",
        "loss": float(loss),
        "routing_counts": {str(i): {"counts_per_class": cnt,
                                    "classes": c.K(i),
                                    "skip_class": (c.n_experts[i] if c.use_mod else None)}
                           for i, cnt in stats.items()},
        "min_routing_margin": margin,
        **info,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")

    # ---- read back and re-evaluate from the files alone ----
    verify_case_dir(d)
    size = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))
    print(f"{case['name']:12s} B={B} T={T:2d} seed={seed} loss={float(loss):.6f} "
          f"routing={stats} margin={margin:.2e} size={size} "
          f"f32: logits {info['f32_twin_logits_maxerr_over_maxabs']:.1e} loss {info['f32_twin_loss_abserr']:.1e} "
          f"grad {info['f32_twin_worst_grad_rel_l2']:.1e}"
          + (f" router-eps {info['c1_logit_change_if_router_eps_1e-6']:.1e}" if "c1_logit_change_if_router_eps_1e-6" in info else ""))
    return size


def read_tokens(path):
    with open(path) as f:
        return torch.tensor([[int(x) for x in line.split()] for line in f if line.strip()], dtype=torch.int64)


def verify_case_dir(d):
    """Rebuild the float64 twin from config.json + model.safetensors + tokens.txt and check that it
    reproduces expected.safetensors (logits bit-exact after f32 rounding, loss and grads exact)."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    model = ZayaTwin(cfg, dtype=torch.float64)
    w = st.load(os.path.join(d, "model.safetensors"))
    for n, t in w.items():
        assert t.dtype == torch.float32, n
    model.load_tensors(w)
    tokens = read_tokens(os.path.join(d, "tokens.txt"))
    assert (tokens == 0).any(), "no pad ids"
    logits, loss, grads = evaluate(model, tokens)
    exp = st.load(os.path.join(d, "expected.safetensors"))
    assert exp["loss"].dtype == torch.float64 and tuple(exp["loss"].shape) == (1,)
    assert torch.equal(exp["logits"], logits.to(torch.float32))
    assert float(exp["loss"][0]) == float(loss)
    names = set(exp) - {"logits", "loss"}
    assert names == set(grads), names ^ set(grads)
    for n, g in grads.items():
        assert torch.equal(exp[n], g.to(torch.float32)), n
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None,
                    help="directory for the cases (default: tests/fixtures/model, the windowed ones "
                         "tests/fixtures/model_swa)")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions
    total = 0
    for case in CASES:
        if args.only and case["name"] not in args.only:
            continue
        out = args.out or (DEFAULT_OUT_SWA if "swa_layers" in case["cfg"] else DEFAULT_OUT)
        os.makedirs(out, exist_ok=True)
        total += build_case(case, out)
    print(f"total bytes: {total}")


if __name__ == "__main__":
    main()

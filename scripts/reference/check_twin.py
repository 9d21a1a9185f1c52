#!/usr/bin/python3
"""Self-checks of the ZAYA1 PyTorch twin.  Run:  /usr/bin/python3 scripts/reference/check_twin.py

 (i)   gradcheck (float64) of the loss w.r.t. every parameter on very small configs (MoD on with the
       skip class selected, MoD off, EDA off), plus central finite differences on sampled entries
 (ii)  the CCA composite conv equals the explicit loops of docs/model.md §4.2 (y_{-1} = b0)
 (iii) the pad row's gradient excludes the lookup gradient (only the LM-head part)
 (iv)  parameter counts: §12.2 tiny (155,556 / 122,788 / 79 tensors incl. 2 buffers / 49,060 active)
       and ZAYA1-base (8,840,488,784 total) from shapes
 (v)   an independent loop-level implementation of §3-§6 (per token, per head, written from
       the formulas) agrees with the vectorised twin on every committed test case
 (vi)  RoPE tables: fp32 computation agrees with a numpy float32 evaluation of §4.6
 (vii) the committed vectors in tests/fixtures/model/ are reproduced from their own files
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_vectors as mv  # noqa: E402
import safetensors_io as st  # noqa: E402
from zaya_twin import (CCA, ZayaConfig, ZayaTwin, count_params, init_random_test_,  # noqa: E402
                       rope_tables)

DATA = os.path.join(mv.REPO, "tests", "fixtures", "model")
# The sliding-window cases (docs/model.md §4.9), kept apart from DATA's (see tests/fixtures/model_swa).
DATA_SWA = os.path.join(mv.REPO, "tests", "fixtures", "model_swa")


def case_dirs():
    """(path, name) of every committed case, DATA's then DATA_SWA's."""
    out = []
    for root in (DATA, DATA_SWA):
        if os.path.isdir(root):
            out += [(os.path.join(root, x), x) for x in sorted(os.listdir(root))
                    if os.path.isdir(os.path.join(root, x))]
    return out
RESULTS = []


def report(name, ok, detail=""):
    RESULTS.append((name, ok))
    print(f"[{'PASS' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail else ""))


def small_model(cfg, seed, bias=None, min_margin=1e-3, B=2, T=5, no_pad=False):
    """Random twin + tokens with a routing margin large enough for finite differences."""
    for attempt in range(500):
        gen = torch.Generator().manual_seed(seed + attempt)
        m = ZayaTwin(cfg, dtype=torch.float64)
        init_random_test_(m, gen)
        with torch.no_grad():
            for li, ov in (bias or {}).items():
                for k, v in ov.items():
                    m.model.layers[li].zaya_block.router.balancing_biases[k] = v
        m.round_to_f32_()
        lo = 1 if no_pad else 0
        tok = torch.randint(lo, m.config.V, (B, T), generator=gen)
        if not no_pad:
            tok[0, 1] = 0
            tok[1, 0] = 0
        with torch.no_grad():
            m(tok)
        stats, margin = mv.routing_stats(m)
        if margin >= min_margin:
            return m, tok, stats
    raise RuntimeError("no seed with a sufficient routing margin")


# ------------------------------------------------------------------------------------------ (i)
def check_gradcheck():
    cfgs = [
        ("mod+eda, skip selected", mv.make_config(16, 4, 1, ["a", 3, "a", 3], F=8, R=4, V=16, eps=1e-2),
         {1: {3: 0.3}}),
        ("no mod, eda", mv.make_config(16, 4, 2, ["a", 2, "a", 3, "a"], F=[6, 8], R=4, V=16, mod=False), None),
        ("no eda, r=d", mv.make_config(16, 4, 1, ["a", 2, "a", 2], F=[4, 8], R=[4, 6], V=16, eda=False,
                                       prf=1.0), None),
    ]
    for k, (label, cfg, bias) in enumerate(cfgs):
        fast = k > 0  # full Jacobian for the first config, random projections (fast_mode) for the rest
        m, tok, stats = small_model(cfg, 777, bias=bias, no_pad=True)
        names = [n for n, _ in m.named_parameters()]
        params = tuple(p.detach().clone().requires_grad_(True) for _, p in m.named_parameters())
        bufs = {n: b for n, b in m.named_buffers()}

        def f(*ps):
            d = dict(zip(names, ps))
            d.update(bufs)
            return m.loss(tok, functional_call(m, d, (tok,)))

        ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-7, rtol=1e-4, raise_exception=False,
                                      fast_mode=fast)
        n_el = sum(p.numel() for p in params)
        skip_info = ""
        if m.config.use_mod:
            skip_info = f", skip chosen {[cnt[-1] for cnt in stats.values()]} times"
        report(f"(i) gradcheck{' (fast_mode)' if fast else ''} [{label}] over all {len(params)} parameter tensors ({n_el} values)", ok,
               f"routing {stats}{skip_info}")


def check_finite_differences():
    """4th-order central differences on 3 random entries of every parameter tensor (tiny-like case
    with the skip class active); routing must not change at any perturbed point."""
    cfg = mv.make_config(32, 4, 1, ["a", 4, "a", 4], F=16, R=8, V=64)
    m, tok, stats0 = small_model(cfg, 4242, bias={1: {4: 0.3}}, B=2, T=7, min_margin=1e-3, no_pad=True)
    m.zero_grad()
    m.loss(tok).backward()
    choices0 = {i: rt["choice"].clone() for i, rt in m.routing().items()}
    gen = torch.Generator().manual_seed(5)
    worst, worst_abs, count, nonzero, flips = 0.0, 0.0, 0, 0, 0
    h = 1e-4

    def L():
        nonlocal flips
        v = m.loss(tok).item()
        flips += any(not torch.equal(rt["choice"], choices0[i]) for i, rt in m.routing().items())
        return v

    for n, p in m.named_parameters():
        flat = p.data.view(-1)
        for _ in range(3):
            k = int(torch.randint(0, flat.numel(), (1,), generator=gen))
            old = flat[k].item()
            f = {}
            with torch.no_grad():
                for s in (-2, -1, 1, 2):
                    flat[k] = old + s * h
                    f[s] = L()
                flat[k] = old
            num = (-f[2] + 8 * f[1] - 8 * f[-1] + f[-2]) / (12 * h)
            ana = p.grad.view(-1)[k].item() if p.grad is not None else 0.0
            worst_abs = max(worst_abs, abs(num - ana))
            if abs(ana) > 1e-4:
                worst = max(worst, abs(num - ana) / abs(ana))
                nonzero += 1
            count += 1
    report("(i) 4th-order central finite differences, 3 entries of every parameter (skip class active)",
           worst < 1e-7 and worst_abs < 1e-10 and flips == 0,
           f"{count} entries, routing {stats0}: max |num-ana| = {worst_abs:.1e}; max relative error over the "
           f"{nonzero} entries with |grad| > 1e-4: {worst:.1e}; routing flips {flips}")


# ------------------------------------------------------------------------------------------ (ii)
def conv_loops(u, w0, b0, w1, b1, d):
    """Explicit docs/model.md §4.2 formulas. u: [T, C] -> z: [T, C]."""
    T, C = u.shape

    def U(j):
        return u[j] if j >= 0 else torch.zeros(C, dtype=u.dtype)

    y = {}
    for j in range(-1, T):
        y[j] = torch.stack([b0[c] + w0[c, 0, 0] * U(j - 1)[c] + w0[c, 0, 1] * U(j)[c] for c in range(C)])
    z = torch.zeros(T, C, dtype=u.dtype)
    for t in range(T):
        for c in range(C):
            g = c // d
            acc = b1[c]
            for i in range(d):
                acc = acc + w1[c, i, 0] * y[t - 1][g * d + i] + w1[c, i, 1] * y[t][g * d + i]
            z[t, c] = acc
    return z


def check_conv():
    cfg = ZayaConfig(mv.make_config(48, 6, 3, ["a"], F=[], R=[], V=16))  # d=8, Hq=3, Hk=3, C=48
    torch.manual_seed(0)
    cca = CCA(cfg, torch.float64)
    with torch.no_grad():
        for p in cca.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64))
    B, T = 2, 6
    u = torch.randn(B, T, cfg.C, dtype=torch.float64)
    z = cca.conv(u)
    w0, b0 = cca.conv_qk[0].weight, cca.conv_qk[0].bias
    w1, b1 = cca.conv_qk[1].weight, cca.conv_qk[1].bias
    err = 0.0
    err_zero_pad = 0.0
    with torch.no_grad():
        for b in range(B):
            ref = conv_loops(u[b], w0, b0, w1, b1, cfg.d)
            err = max(err, float((z[b] - ref).abs().max()))
            # the wrong variant (stage 1 on a zero-padded stage-0 output, y_{-1} = 0)
            y = F.conv1d(F.pad(u[b].T[None], (1, 0)), w0, b0, groups=cfg.C)
            zw = F.conv1d(F.pad(y, (1, 0)), w1, b1, groups=cfg.Hq + cfg.Hk)[0].T
            err_zero_pad = max(err_zero_pad, float((zw[0] - ref[0]).abs().max()))
    report("(ii) CCA conv == explicit loops of §4.2 (y_{-1} = b0)", err < 1e-12,
           f"max |diff| {err:.1e}; the y_{{-1}}=0 variant would differ at t=0 by {err_zero_pad:.2f}")


# ------------------------------------------------------------------------------------------ (iii)
def check_c6():
    cfg = mv.make_config(32, 4, 1, ["a", 4, "a", 4], F=16, R=8, V=64)
    m, tok, _ = small_model(cfg, 99, B=2, T=7)
    pad = m.config.pad_token_id
    assert (tok == pad).any()
    m.zero_grad()
    m.loss(tok).backward()
    g_twin = m.model.embed_tokens.weight.grad.clone()

    # LM-head-only gradient of the pad row: lookup through a detached copy of E.
    E = m.model.embed_tokens.weight

    def loss_with(lookup_E):
        mm = m.model
        orig = mm.embed_tokens.forward
        mm.embed_tokens.forward = lambda t: F.embedding(t, lookup_E)
        try:
            return m.loss(tok)
        finally:
            mm.embed_tokens.forward = orig

    m.zero_grad()
    loss_with(E.detach()).backward()
    g_head = E.grad.clone()
    m.zero_grad()
    loss_with(E).backward()          # no padding_idx: lookup gradient also reaches the pad row
    g_full = E.grad.clone()
    ok1 = torch.allclose(g_twin[pad], g_head[pad], rtol=0, atol=1e-15)
    lookup_part = float((g_full[pad] - g_head[pad]).abs().max())
    others = [v for v in tok.unique().tolist() if v != pad]
    ok2 = torch.allclose(g_twin[others], g_full[others], rtol=1e-12, atol=1e-15)
    report("(iii) pad-row gradient = LM-head part only; other rows = lookup + LM head",
           ok1 and ok2 and lookup_part > 1e-6,
           f"pad-row lookup contribution that is excluded: max {lookup_part:.2e}")


# ------------------------------------------------------------------------------------------ (iv)
def zaya1_base_config():
    n = 40
    cfg = mv.make_config(2048, 16, 2, ["a", 16] * n, F=4096, R=256, V=262272, theta=1000000)
    cfg.update({"kv_channels": 128, "max_position_embeddings": 32768, "num_hidden_layers": 120,
                "torch_dtype": "bfloat16"})
    return cfg


def check_counts():
    tiny = dict(mv.TEMPLATE)
    m = ZayaTwin(tiny, dtype=torch.float32)
    m.check_names()
    n_params = sum(p.numel() for p in m.parameters())
    n_emb = m.model.embed_tokens.weight.numel()
    n_tensors = len(list(m.parameters())) + len(list(m.buffers()))
    n_buf = len(list(m.buffers()))
    c = count_params(tiny)
    ok = (n_params == 155556 and n_params - n_emb == 122788 and n_tensors == 79 and n_buf == 2
          and c["total"] == 155556 and c["no_embed"] == 122788 and c["active_no_embed"] == 49060
          and c["tensors"] == 79)
    report("(iv) §12.2 tiny counts (allocated module and analytic)", ok,
           f"{n_params} params, {n_params - n_emb} without embedding, {c['active_no_embed']} active "
           f"without embedding, {n_tensors} tensors incl. {n_buf} buffers")
    b = count_params(zaya1_base_config())
    ok = (b["total"] == 8840488784 and b["no_embed"] == 8303355728 and b["active_no_embed"] == 753608528
          and b["buffer_values"] == 680 and b["tensors"] == 2483)
    report("(iv) ZAYA1-base counts from shapes (not allocated)", ok,
           f"{b['total']:,} total, {b['no_embed']:,} without embedding, {b['active_no_embed']:,} active, "
           f"{b['buffer_values']} buffer values, {b['tensors']} tensors")


# ------------------------------------------------------------------------------------------ (v)
def naive_forward(model, tokens):
    """Loop-level docs/model.md §3-§6 implementation, independent of the twin's vectorised code.
    Uses only the name -> tensor map and the config. Returns logits [B,T,V] and loss (float64)."""
    c = model.config
    W = {n: t.detach().to(torch.float64) for n, t in model.named_tensors().items()}
    d, Hq, Hk, G, r = c.d, c.Hq, c.Hk, c.G, c.r
    sd = math.sqrt(d)
    # §4.6 tables element-wise (independent of the twin's torch code)
    m_half = r // 2

    def rope_np(t, i, theta):
        f32 = np.float32
        e = f32(f32(2 * i) / f32(r))
        inv = f32(f32(1.0) / f32(math.pow(float(f32(theta)), float(e))))
        a = float(f32(f32(t) * inv))
        return float(f32(math.cos(a))), float(f32(math.sin(a)))

    def rms(v, w, eps):
        return w * (v / math.sqrt(float((v * v).mean()) + eps))

    def rope(v, t, theta):
        out = v.clone()
        for i in range(m_half):
            cs, sn = rope_np(t, i, theta)
            out[i] = v[i] * cs - v[i + m_half] * sn
            out[i + m_half] = v[i + m_half] * cs + v[i] * sn
        return out

    def gelu(x):
        return torch.tensor([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()], dtype=torch.float64)

    B, T = tokens.shape
    all_logits = []
    for b in range(B):
        tk = tokens[b].tolist()
        o = [W["model.embed_tokens.weight"][v] for v in tk]
        h = None
        rprev = None
        for i in range(c.L):
            p = f"model.layers.{i}."
            if i == 0:
                h = [(o[t] + W[p + "res_scale.hidden_states_bias"]) * W[p + "res_scale.hidden_states_scale"]
                     for t in range(T)]
            else:
                h = [(o[t] + W[p + "res_scale.hidden_states_bias"]) * W[p + "res_scale.hidden_states_scale"]
                     + (h[t] + W[p + "res_scale.residual_bias"]) * W[p + "res_scale.residual_scale"]
                     for t in range(T)]
            x = [rms(h[t], W[p + "input_norm.weight"], c.eps) for t in range(T)]
            if c.kinds[i] == "a":
                q = p + "self_attn.qkv."
                Wq, Wk = W[q + "linear_q.weight"], W[q + "linear_k.weight"]
                q0 = [Wq @ x[t] for t in range(T)]
                k0 = [Wk @ x[t] for t in range(T)]
                u = torch.stack([torch.cat([q0[t], k0[t]]) for t in range(T)])
                z = conv_loops(u, W[q + "conv_qk.0.weight"], W[q + "conv_qk.0.bias"],
                               W[q + "conv_qk.1.weight"], W[q + "conv_qk.1.bias"], d)
                # docs/model.md §4.9: a windowed sub-layer has its own theta and sees keys t-Wi+1 .. t.
                Wi = c.windows[i]
                theta = c.swa_theta if Wi > 0 else c.rope_theta
                Qh, Kh, Vh = [], [], []
                for t in range(T):
                    Qt, Kt = [], []
                    for hh in range(Hq):
                        g = hh // G
                        Qt.append(z[t, hh * d:(hh + 1) * d] + 0.5 * (q0[t][hh * d:(hh + 1) * d]
                                                                     + k0[t][g * d:(g + 1) * d]))
                    for g in range(Hk):
                        qm = sum(q0[t][hh * d:(hh + 1) * d] for hh in range(g * G, (g + 1) * G)) / G
                        Kt.append(z[t, (Hq + g) * d:(Hq + g + 1) * d] + 0.5 * (qm + k0[t][g * d:(g + 1) * d]))
                    xp = x[t - 1] if t > 0 else torch.zeros_like(x[t])
                    v = torch.cat([W[q + "val_proj1.weight"] @ x[t], W[q + "val_proj2.weight"] @ xp])
                    Qh.append([rope(sd * Qt[hh] / Qt[hh].norm(), t, theta) for hh in range(Hq)])
                    Kh.append([rope(W[q + "temp"][g] * sd * Kt[g] / Kt[g].norm(), t, theta) for g in range(Hk)])
                    Vh.append([v[g * d:(g + 1) * d] for g in range(Hk)])
                o = []
                for t in range(T):
                    heads = []
                    for hh in range(Hq):
                        g = hh // G
                        keys = range(max(0, t - Wi + 1) if Wi > 0 else 0, t + 1)
                        s = torch.stack([(Qh[t][hh] * Kh[tau][g]).sum() / sd for tau in keys])
                        a = torch.softmax(s, 0)
                        heads.append(sum(a[j] * Vh[tau][g] for j, tau in enumerate(keys)))
                    o.append(W[p + "self_attn.o_proj.weight"] @ torch.cat(heads))
            else:
                rp = p + "zaya_block.router."
                n_exp = c.n_experts[i]
                rr = [W[rp + "down_proj.weight"] @ x[t] + W[rp + "down_proj.bias"] for t in range(T)]
                if (rp + "router_states_scale") in W and rprev is not None:
                    rr = [rr[t] + W[rp + "router_states_scale"] * rprev[t] for t in range(T)]
                rprev = rr
                o = []
                for t in range(T):
                    nn_ = rms(rr[t], W[rp + "rmsnorm_eda.weight"], c.eps)
                    a1 = gelu(W[rp + "router_mlp.0.weight"] @ nn_ + W[rp + "router_mlp.0.bias"])
                    a2 = gelu(W[rp + "router_mlp.2.weight"] @ a1 + W[rp + "router_mlp.2.bias"])
                    ell = W[rp + "router_mlp.4.weight"] @ a2
                    pr = torch.softmax(ell, 0)
                    sc = pr.to(torch.float32) + W[rp + "balancing_biases"].to(torch.float32)
                    e = int(torch.argmax(sc))
                    w = pr[e]
                    if e == n_exp:
                        o.append(w * x[t])
                    else:
                        ep = p + f"zaya_block.experts.local_experts.{e}."
                        gu = W[ep + "linear_fc1.weight"] @ x[t]
                        half = gu.numel() // 2
                        gg, uu = gu[:half], gu[half:]
                        o.append(w * (W[ep + "linear_fc2.weight"] @ (gg * torch.sigmoid(gg) * uu)))
        hf = [(o[t] + W["model.res_scale.hidden_states_bias"]) * W["model.res_scale.hidden_states_scale"]
              + (h[t] + W["model.res_scale.residual_bias"]) * W["model.res_scale.residual_scale"]
              for t in range(T)]
        f = [rms(hf[t], W["model.final_norm.weight"], c.eps) for t in range(T)]
        all_logits.append(torch.stack([W["model.embed_tokens.weight"] @ f[t] for t in range(T)]))
    logits = torch.stack(all_logits)
    nll = []
    for b in range(B):
        for t in range(T - 1):
            lse = torch.logsumexp(logits[b, t], 0)
            nll.append(lse - logits[b, t, tokens[b, t + 1]])
    return logits, torch.stack(nll).mean()


def check_naive():
    dirs = case_dirs()
    if not dirs:
        report("(v) loop-level implementation == twin", False, "no committed cases found")
        return
    for dd, name in dirs:
        with open(os.path.join(dd, "config.json")) as f:
            cfg = json.load(f)
        m = ZayaTwin(cfg, dtype=torch.float64)
        m.load_tensors(st.load(os.path.join(dd, "model.safetensors")))
        tok = mv.read_tokens(os.path.join(dd, "tokens.txt"))
        with torch.no_grad():
            lt = m(tok)
            ls = m.loss(tok, lt)
            ln, lsn = naive_forward(m, tok)
        err = float((ln - lt).abs().max() / lt.abs().max())
        report(f"(v) loop-level implementation == twin [{name}]", err < 1e-12 and abs(float(ls - lsn)) < 1e-12,
               f"logits rel err {err:.1e}, loss diff {abs(float(ls - lsn)):.1e}")


# ------------------------------------------------------------------------------------------ (vi)
def check_rope():
    """Twin tables == element-wise evaluation of §4.6 with Python's math on fp32-rounded values."""
    f32 = np.float32
    exact = True
    torch_native_err = 0.0
    for T, r, theta in ((64, 4, 10000.0), (64, 64, 1000000.0), (4096, 64, 1000000.0), (33, 6, 10000.0),
                        (40, 8, 500000.0), (4096, 128, 10000.0)):
        cos, sin = rope_tables(T, r, theta, torch.float32)
        m = r // 2
        ref_c = np.zeros((T, m), np.float32)
        ref_s = np.zeros((T, m), np.float32)
        for i in range(m):
            e = f32(f32(2 * i) / f32(r))
            P = f32(math.pow(float(f32(theta)), float(e)))
            inv = f32(f32(1.0) / P)
            for t in range(T):
                a = f32(f32(t) * inv)
                ref_c[t, i] = f32(math.cos(float(a)))
                ref_s[t, i] = f32(math.sin(float(a)))
        exact &= bool(np.array_equal(cos.numpy(), np.concatenate([ref_c, ref_c], 1)))
        exact &= bool(np.array_equal(sin.numpy(), np.concatenate([ref_s, ref_s], 1)))
        # S1's own torch fp32 computation (informational)
        e = torch.arange(0, r, 2, dtype=torch.int64).float() / r
        inv = 1.0 / (theta ** e)
        ang = (inv[:, None] @ torch.arange(T).float()[None, :]).T
        torch_native_err = max(torch_native_err, float(np.abs(ang.cos().numpy() - ref_c).max()),
                               float(np.abs(ang.sin().numpy() - ref_s).max()))
    report("(vi) RoPE fp32 tables == element-wise §4.6 (powf/cosf/sinf correctly rounded)", exact,
           f"S1's torch fp32 computation (CPU) deviates by at most {torch_native_err:.1e}")


# ------------------------------------------------------------------------------------------ (vii)
def check_committed():
    for dd, name in case_dirs():
        try:
            mv.verify_case_dir(dd)
            report(f"(vii) committed vectors reproduce from their files [{name}]", True)
        except AssertionError as e:
            report(f"(vii) committed vectors reproduce from their files [{name}]", False, str(e))


def main():
    torch.set_num_threads(1)
    check_counts()
    check_conv()
    check_c6()
    check_rope()
    check_gradcheck()
    check_finite_differences()
    check_naive()
    check_committed()
    n_fail = sum(1 for _, ok in RESULTS if not ok)
    print(f"\n{len(RESULTS) - n_fail}/{len(RESULTS)} checks passed")
    sys.exit(1 if n_fail else 0)


if __name__ == "__main__":
    main()

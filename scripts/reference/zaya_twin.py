"""PyTorch reference twin of ZAYA1 (see docs/model.md).

A clean nn.Module whose named_parameters() / named_buffers() carry exactly the checkpoint names of
docs/model.md §2 (model.embed_tokens.weight, model.layers.{i}.self_attn.qkv.linear_q.weight, ...).
Forward = §3-§6 with the conventions of §0.2; backward = autograd (§8 is what autograd computes,
with the pad row's lookup gradient dropped by nn.Embedding's padding_idx).

The compute dtype is a constructor parameter (float64 for test vectors). Points docs/model.md requires
to be fp32-or-wider (RMSNorm statistics, softmaxes, CE) are computed in max(dtype, fp32).
RoPE tables are always built in fp32 and then cast to the compute dtype.
The router's top-1 choice compares fp32(p) + fp32(bias).

Usage:
    cfg = json.load(open("config.json"))
    model = ZayaTwin(cfg, dtype=torch.float64)
    model.load_tensors(safetensors_io.load("model.safetensors"))
    logits = model(tokens)            # [B, T, V]
    loss = model.loss(tokens)         # mean next-token CE, no ignore index
"""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------
# Config (docs/model.md §1)
# --------------------------------------------------------------------------------------------

# Fields whose value is fixed for ZAYA1 (docs/model.md §1.1): name -> (required value(s), S1 default)
_FIXED = {
    "moe_router_topk": ((1,), 1),
    "attention_bias": ((False,), False),
    "add_bias_linear": ((False,), False),
    "lm_head_bias": ((False,), False),
    "gated_linear_unit": ((True,), True),
    "activation_func": (("swiglu",), "swiglu"),
    "bias_activation_fusion": ((True,), True),
    "activation_func_fp8_input_store": ((False,), False),
    "tie_word_embeddings": ((True,), True),
    "scale_residual_merge": ((True,), True),
    "attention_dropout": ((0.0,), 0.0),
    "sliding_window": ((None,), None),
}

_S1_DEFAULTS = {
    "hidden_size": 2048, "vocab_size": 262272, "num_attention_heads": 16, "num_key_value_heads": 2,
    "moe_router_topk": 1, "zaya_use_mod": True, "zaya_use_eda": True, "norm_epsilon": 1e-5,
    "rope_theta": 10000, "partial_rotary_factor": 0.5, "rope_scaling": None, "pad_token_id": 0,
    "bos_token_id": 2, "eos_token_id": 1,
}


class ZayaConfig:
    """Validated view of an S1-schema config dict (docs/model.md §1.3); raises ValueError naming the field."""

    def __init__(self, cfg):
        self.raw = dict(cfg)

        def get(k):
            return cfg.get(k, _S1_DEFAULTS.get(k))

        for k, (allowed, default) in _FIXED.items():
            v = cfg.get(k, default)
            if v not in allowed:
                raise ValueError(f"config field '{k}' must be {allowed[0]!r}, got {v!r}")
        rs = get("rope_scaling")
        if not (rs is None or rs is False):
            raise ValueError("config field 'rope_scaling' must be null or false (plain RoPE only)")

        if "zaya_layers" not in cfg:
            raise ValueError("config field 'zaya_layers' is missing")
        layers = cfg["zaya_layers"]
        if not isinstance(layers, list) or len(layers) == 0:
            raise ValueError("config field 'zaya_layers' must be a non-empty list")
        self.L = L = len(layers)
        self.kinds = []
        self.n_experts = []
        for i, e in enumerate(layers):
            if e == "a":
                self.kinds.append("a")
                self.n_experts.append(0)
            elif isinstance(e, int) and not isinstance(e, bool) and e > 0:
                self.kinds.append("m")
                self.n_experts.append(e)
            else:
                raise ValueError(f"config field 'zaya_layers' entry {i} must be \"a\" or a positive integer")
        for k in ("cca_num_q_heads", "num_query_groups_list", "ffn_hidden_size_list", "zaya_mlp_expansion"):
            if k not in cfg or not isinstance(cfg[k], list) or len(cfg[k]) != L:
                raise ValueError(f"config field '{k}' must be a list of length len(zaya_layers) = {L}")

        self.D = D = int(get("hidden_size"))
        self.V = int(get("vocab_size"))
        self.Nh = Nh = int(get("num_attention_heads"))
        self.Hk = Hk = int(get("num_key_value_heads"))
        if D <= 0 or self.V <= 0:
            raise ValueError("config field 'hidden_size'/'vocab_size' must be positive")
        if Nh <= 0 or D % Nh != 0:
            raise ValueError("config field 'num_attention_heads' must divide 'hidden_size'")
        if Nh % 2 != 0:
            raise ValueError("config field 'num_attention_heads' must be even")
        self.d = d = D // Nh
        self.Hq = Hq = Nh // 2
        if Hk <= 0 or Hq % Hk != 0:
            raise ValueError("config field 'num_key_value_heads' must divide num_attention_heads/2")
        if (Hk * d) % 2 != 0:
            raise ValueError("config field 'num_key_value_heads': H_k*d must be even (value halves)")
        self.G = Hq // Hk
        self.C = (Hq + Hk) * d
        prf = float(get("partial_rotary_factor"))
        self.partial_rotary_factor = prf
        self.r = r = int(math.floor(d * prf))
        if r % 2 != 0 or r > d or r < 0:
            raise ValueError("config field 'partial_rotary_factor': r = floor(d*factor) must be even and <= d")
        self.rope_theta = float(get("rope_theta"))
        # Sliding-window CCA layers (docs/model.md §4.9): `swa_layers` gives each sub-layer's window
        # (0 = full attention; query t sees keys t-W+1 .. t, W keys counting itself), and
        # `swa_rotary_base` the windowed layers' RoPE theta (default: rope_theta).
        swa = cfg.get("swa_layers")
        if swa is None:
            swa = [0] * L
        if not isinstance(swa, list) or len(swa) != L:
            raise ValueError(f"config field 'swa_layers' must be a list of length len(zaya_layers) = {L}")
        for i, w in enumerate(swa):
            if not isinstance(w, int) or isinstance(w, bool) or w < 0:
                raise ValueError(f"config field 'swa_layers'[{i}] must be an integer >= 0")
            if w > 0 and self.kinds[i] != "a":
                raise ValueError(f"config field 'swa_layers'[{i}] is a window on an MoE sub-layer")
        self.windows = list(swa)
        self.swa_theta = float(cfg.get("swa_rotary_base") or self.rope_theta)
        self.eps = float(get("norm_epsilon"))
        self.use_mod = bool(get("zaya_use_mod"))
        self.use_eda = bool(get("zaya_use_eda"))
        self.pad_token_id = int(get("pad_token_id"))
        if not (0 <= self.pad_token_id < self.V):
            raise ValueError("config field 'pad_token_id' must be a valid token id")

        self.F = []
        self.R = []
        for i in range(L):
            if self.kinds[i] == "a":
                if cfg["cca_num_q_heads"][i] != Hq:
                    raise ValueError(f"config field 'cca_num_q_heads'[{i}] must equal num_attention_heads/2 = {Hq}")
                if cfg["num_query_groups_list"][i] != Hk:
                    raise ValueError(f"config field 'num_query_groups_list'[{i}] must equal num_key_value_heads = {Hk}")
                self.F.append(0)
                self.R.append(0)
            else:
                f = cfg["ffn_hidden_size_list"][i]
                rr = cfg["zaya_mlp_expansion"][i]
                if not isinstance(f, int) or f <= 0 or f % 2 != 0:
                    raise ValueError(f"config field 'ffn_hidden_size_list'[{i}] must be even and > 0")
                if not isinstance(rr, int) or rr <= 0:
                    raise ValueError(f"config field 'zaya_mlp_expansion'[{i}] must be > 0")
                self.F.append(f)
                self.R.append(rr)
        moe = [i for i in range(L) if self.kinds[i] == "m"]
        self.moe_layers = moe
        if self.use_eda and moe:
            if len(set(self.R[i] for i in moe)) != 1:
                raise ValueError("config field 'zaya_mlp_expansion' must be equal in all MoE sub-layers with zaya_use_eda")
            if moe[0] != 1:
                raise ValueError("config field 'zaya_layers': with zaya_use_eda the first MoE sub-layer must be index 1")

    def K(self, i):
        return self.n_experts[i] + (1 if self.use_mod else 0)

    def has_gamma(self, i):
        # S1: EDA scale exists iff zaya_use_eda and the sub-layer index is not 1 (docs/model.md §5.2).
        return self.kinds[i] == "m" and self.use_eda and i != 1


def param_shapes(cfg):
    """Ordered dict name -> (shape tuple, kind) with kind 'param' or 'buffer' (docs/model.md §2).
    Works from the config alone (no allocation), e.g. for counting ZAYA1-base."""
    c = cfg if isinstance(cfg, ZayaConfig) else ZayaConfig(cfg)
    D, d, Hq, Hk, C = c.D, c.d, c.Hq, c.Hk, c.C
    out = OrderedDict()
    P = lambda n, s: out.__setitem__(n, (tuple(s), "param"))
    out_buf = lambda n, s: out.__setitem__(n, (tuple(s), "buffer"))
    P("model.embed_tokens.weight", (c.V, D))
    for i in range(c.L):
        p = f"model.layers.{i}."
        P(p + "input_norm.weight", (D,))
        P(p + "res_scale.hidden_states_scale", (D,))
        P(p + "res_scale.hidden_states_bias", (D,))
        if i != 0:
            P(p + "res_scale.residual_scale", (D,))
            P(p + "res_scale.residual_bias", (D,))
        if c.kinds[i] == "a":
            q = p + "self_attn.qkv."
            P(q + "linear_q.weight", (Hq * d, D))
            P(q + "linear_k.weight", (Hk * d, D))
            P(q + "val_proj1.weight", (Hk * d // 2, D))
            P(q + "val_proj2.weight", (Hk * d // 2, D))
            P(q + "conv_qk.0.weight", (C, 1, 2))
            P(q + "conv_qk.0.bias", (C,))
            P(q + "conv_qk.1.weight", (C, d, 2))
            P(q + "conv_qk.1.bias", (C,))
            P(q + "temp", (Hk,))
            P(p + "self_attn.o_proj.weight", (D, Hq * d))
        else:
            R, K, Fh = c.R[i], c.K(i), c.F[i]
            r = p + "zaya_block.router."
            P(r + "down_proj.weight", (R, D))
            P(r + "down_proj.bias", (R,))
            if c.has_gamma(i):
                P(r + "router_states_scale", (R,))
            P(r + "rmsnorm_eda.weight", (R,))
            P(r + "router_mlp.0.weight", (R, R))
            P(r + "router_mlp.0.bias", (R,))
            P(r + "router_mlp.2.weight", (R, R))
            P(r + "router_mlp.2.bias", (R,))
            P(r + "router_mlp.4.weight", (K, R))
            out_buf(r + "balancing_biases", (K,))
            for e in range(c.n_experts[i]):
                x = p + f"zaya_block.experts.local_experts.{e}."
                P(x + "linear_fc1.weight", (Fh, D))
                P(x + "linear_fc2.weight", (D, Fh // 2))
    for k in ("hidden_states_scale", "hidden_states_bias", "residual_scale", "residual_bias"):
        P("model.res_scale." + k, (D,))
    P("model.final_norm.weight", (D,))
    return out


def count_params(cfg):
    """Analytic counts from shapes: dict(total, no_embed, active_no_embed, buffer_values, tensors)."""
    c = cfg if isinstance(cfg, ZayaConfig) else ZayaConfig(cfg)
    shapes = param_shapes(c)
    numel = lambda s: math.prod(s)
    total = sum(numel(s) for s, k in shapes.values() if k == "param")
    emb = numel(shapes["model.embed_tokens.weight"][0])
    buf = sum(numel(s) for s, k in shapes.values() if k == "buffer")
    experts = 0
    active_experts = 0
    for i in c.moe_layers:
        per = c.F[i] * c.D + c.D * (c.F[i] // 2)
        experts += per * c.n_experts[i]
        active_experts += per
    return {
        "total": total,
        "no_embed": total - emb,
        "active_no_embed": total - emb - experts + active_experts,
        "buffer_values": buf,
        "tensors": len(shapes),
    }


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

def _wide(dtype):
    """dtype for statistics that must be fp32 or wider."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class RMSNorm(nn.Module):
    """docs/model.md §3: y = w ⊙ (ρ v), ρ = (mean v² + eps)^(-1/2), ρ computed in >= fp32."""

    def __init__(self, n, eps, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype))
        self.eps = eps

    def forward(self, v):
        w = _wide(v.dtype)
        vw = v.to(w)
        rho = torch.rsqrt(vw.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * (vw * rho).to(v.dtype)


class ResidualScaling(nn.Module):
    """docs/model.md §3: h = (o + β°) ⊙ α° [+ (h_prev + βʳ) ⊙ αʳ  unless first]."""

    def __init__(self, D, first, dtype):
        super().__init__()
        self.first = first
        self.hidden_states_scale = nn.Parameter(torch.ones(D, dtype=dtype))
        self.hidden_states_bias = nn.Parameter(torch.zeros(D, dtype=dtype))
        if not first:
            self.residual_scale = nn.Parameter(torch.ones(D, dtype=dtype))
            self.residual_bias = nn.Parameter(torch.zeros(D, dtype=dtype))

    def forward(self, o, h):
        out = (o + self.hidden_states_bias) * self.hidden_states_scale
        if self.first:
            assert h is None
            return out
        return out + (h + self.residual_bias) * self.residual_scale


def rope_tables(T, r, theta, dtype):
    """docs/model.md §4.6: fp32 tables, then cast to `dtype`. Returns cos, sin of shape [T, r] ([freqs; freqs]).

    Every step is an fp32 operation with a correctly rounded result, as a C/C++ implementation with
    powf/cosf/sinf gives it: e_i = float(2i)/float(r) and 1.0f/P_i and float(t)*inv_freq_i are single
    IEEE fp32 operations; powf, cosf and sinf are evaluated in float64 on the fp32 arguments and rounded
    once to fp32, so the table does not depend on a particular fp32 libm (e.g. torch.pow(fp32 tensor,
    fp32 tensor) is one ulp off for a few exponents, which moves angles near t = 4000 by ~1e-5 rad).
    On CPU this equals S1's torch computation (`θ ** (arange(0, r, 2).float() / r)`, fp32 cos/sin) to
    within the last-ulp rounding of cos/sin (check_twin.py (vi))."""
    if r == 0:
        z = torch.zeros(T, 0, dtype=dtype)
        return z, z
    f32, f64 = torch.float32, torch.float64
    two_i = torch.arange(0, r, 2, dtype=torch.int64).to(f32)                  # float(2i)
    e = two_i / torch.tensor(float(r), dtype=f32)                            # fp32 divide
    theta32 = torch.tensor(theta, dtype=f32)                                 # float(θ)
    P = torch.pow(theta32.to(f64), e.to(f64)).to(f32)                        # powf(float(θ), e)
    inv_freq = torch.tensor(1.0, dtype=f32) / P                              # 1.0f / P
    t = torch.arange(T, dtype=torch.int64).to(f32)                           # float(t)
    ang = t[:, None] * inv_freq[None, :]                                     # one fp32 multiply
    cos = torch.cos(ang.to(f64)).to(f32)                                     # cosf(angle)
    sin = torch.sin(ang.to(f64)).to(f32)                                     # sinf(angle)
    cos = torch.cat([cos, cos], dim=-1)
    sin = torch.cat([sin, sin], dim=-1)
    return cos.to(dtype), sin.to(dtype)


def apply_rope(v, cos, sin, r):
    """NeoX rotation of the first r dims. v: [..., T, d]; cos/sin: [T, r]."""
    if r == 0:
        return v
    m = r // 2
    vr, vp = v[..., :r], v[..., r:]
    rot = torch.cat([-vr[..., m:], vr[..., :m]], dim=-1)
    return torch.cat([vr * cos + rot * sin, vp], dim=-1)


class CCA(nn.Module):
    """docs/model.md §4.1-§4.6 (returns post-RoPE queries/keys and values, head-major)."""

    def __init__(self, c, dtype):
        super().__init__()
        self.c = c
        D, d, Hq, Hk, C = c.D, c.d, c.Hq, c.Hk, c.C
        kw = dict(bias=False, dtype=dtype)
        self.linear_q = nn.Linear(D, Hq * d, **kw)
        self.linear_k = nn.Linear(D, Hk * d, **kw)
        self.val_proj1 = nn.Linear(D, Hk * d // 2, **kw)
        self.val_proj2 = nn.Linear(D, Hk * d // 2, **kw)
        # Stage 0: depthwise (kernel 2), stage 1: grouped over H_q+H_k groups of d channels.
        self.conv_qk = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=2, groups=C, padding=0, bias=True, dtype=dtype),
            nn.Conv1d(C, C, kernel_size=2, groups=Hq + Hk, padding=0, bias=True, dtype=dtype),
        )
        self.temp = nn.Parameter(torch.zeros(Hk, dtype=dtype))

    def conv(self, u):
        """u: [B, T, C] -> z: [B, T, C]. The *input* is padded with two zero columns (as S1), so the
        stage-0 output at the padding position is b0 (y_{-1} = b0, docs/model.md §4.2)."""
        z = self.conv_qk(F.pad(u.transpose(1, 2), (2, 0)))
        return z.transpose(1, 2)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        d, Hq, Hk, G = c.d, c.Hq, c.Hk, c.G
        q0 = self.linear_q(x)                                   # [B,T,Hq*d]
        k0 = self.linear_k(x)                                   # [B,T,Hk*d]
        z = self.conv(torch.cat([q0, k0], dim=-1))              # [B,T,C]
        q0h = q0.view(B, T, Hq, d)
        k0h = k0.view(B, T, Hk, d)
        # §4.3 qk-mean: query head h belongs to kv head h // G.
        Q = z[..., :Hq * d].view(B, T, Hq, d) + 0.5 * (q0h + k0h.repeat_interleave(G, dim=2))
        K = z[..., Hq * d:].view(B, T, Hk, d) + 0.5 * (q0h.view(B, T, Hk, G, d).mean(dim=3) + k0h)
        # §4.4 values: [W_v1 x_t ; W_v2 x_{t-1}] then split into heads.
        x_prev = F.pad(x[:, :-1], (0, 0, 1, 0))
        v = torch.cat([self.val_proj1(x), self.val_proj2(x_prev)], dim=-1).view(B, T, Hk, d)
        # §4.5 L2 norm to sqrt(d), linear key temperature (no eps, no clamp).
        sd = math.sqrt(d)
        qh = Q * (sd / Q.norm(dim=-1, keepdim=True))
        kh = K * (sd / K.norm(dim=-1, keepdim=True)) * self.temp.view(1, 1, Hk, 1)
        # to head-major [B, H, T, d]
        qh, kh, v = qh.transpose(1, 2), kh.transpose(1, 2), v.transpose(1, 2)
        # §4.6 partial NeoX RoPE
        qh = apply_rope(qh, cos, sin, c.r)
        kh = apply_rope(kh, cos, sin, c.r)
        return qh, kh, v


class ZayaAttention(nn.Module):
    """docs/model.md §4.7: causal GQA softmax attention + o_proj; with a window W > 0 (§4.9) query t
    sees only keys t-W+1 .. t."""

    def __init__(self, c, dtype, window=0):
        super().__init__()
        self.c = c
        self.window = window
        self.o_proj = nn.Linear(c.Hq * c.d, c.D, bias=False, dtype=dtype)
        self.qkv = CCA(c, dtype)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q, k, v = self.qkv(x, cos, sin)                              # [B,Hq,T,d], [B,Hk,T,d] x2
        k = k.repeat_interleave(c.G, dim=1)
        v = v.repeat_interleave(c.G, dim=1)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(c.d)     # [B,Hq,T,T]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        if self.window > 0:  # also hide keys tau <= t - W
            mask = mask | torch.ones(T, T, dtype=torch.bool).tril(-self.window)
        s = s.masked_fill(mask, float("-inf"))
        a = torch.softmax(s.to(_wide(s.dtype)), dim=-1).to(s.dtype)  # fp32 or wider
        o = torch.matmul(a, v)                                       # [B,Hq,T,d]
        o = o.transpose(1, 2).reshape(B, T, c.Hq * c.d)
        return self.o_proj(o)


class ZayaRouter(nn.Module):
    """docs/model.md §5.1-§5.4."""

    def __init__(self, c, i, dtype, router_eps=None):
        super().__init__()
        R, K = c.R[i], c.K(i)
        self.K = K
        self.down_proj = nn.Linear(c.D, R, bias=True, dtype=dtype)
        self.has_gamma = c.has_gamma(i)
        if self.has_gamma:
            self.router_states_scale = nn.Parameter(torch.ones(R, dtype=dtype))
        # eps = norm_epsilon (router_eps only overrides it to show that this choice is visible).
        self.rmsnorm_eda = RMSNorm(R, c.eps if router_eps is None else router_eps, dtype)
        self.router_mlp = nn.Sequential(
            nn.Linear(R, R, bias=True, dtype=dtype), nn.GELU(),   # exact erf GELU
            nn.Linear(R, R, bias=True, dtype=dtype), nn.GELU(),
            nn.Linear(R, K, bias=False, dtype=dtype),
        )
        bb = torch.zeros(K, dtype=torch.float32)
        if c.use_mod:
            bb[-1] = -1.0
        self.register_buffer("balancing_biases", bb)

    def forward(self, x, r_prev):
        r = self.down_proj(x)
        if self.has_gamma and r_prev is not None:
            r = r + self.router_states_scale * r_prev               # §5.2 EDA (post-EDA, pre-norm)
        n = self.rmsnorm_eda(r)
        logits = self.router_mlp(n)
        p = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1).to(logits.dtype)  # fp32 or wider
        scores = p.detach().to(torch.float32) + self.balancing_biases.to(torch.float32)  # in fp32
        choice = torch.argmax(scores, dim=-1)                       # first max on ties
        return p, choice, r


class ZayaMLP(nn.Module):
    """SwiGLU expert: fc1 rows [gate; up], f = W2 (SiLU(g) ⊙ u)."""

    def __init__(self, D, Fh, dtype):
        super().__init__()
        self.linear_fc1 = nn.Linear(D, Fh, bias=False, dtype=dtype)
        self.linear_fc2 = nn.Linear(Fh // 2, D, bias=False, dtype=dtype)

    def forward(self, x):
        g, u = self.linear_fc1(x).chunk(2, dim=-1)
        return self.linear_fc2(F.silu(g) * u)


class ZayaExperts(nn.Module):
    def __init__(self, n, D, Fh, dtype):
        super().__init__()
        self.local_experts = nn.ModuleList([ZayaMLP(D, Fh, dtype) for _ in range(n)])


class ZayaBlock(nn.Module):
    """docs/model.md §5.5-§5.6: top-1 dropless dispatch, weight = p[chosen] (not renormalised), skip -> p·x
    (or 0 with skip_outputs_zero: transformers' native ZAYA, docs/checkpoint-layouts.md)."""

    skip_outputs_zero = False

    def __init__(self, c, i, dtype, router_eps=None):
        super().__init__()
        self.n = c.n_experts[i]
        self.use_mod = c.use_mod
        self.router = ZayaRouter(c, i, dtype, router_eps)
        self.experts = ZayaExperts(self.n, c.D, c.F[i], dtype)
        self.last_routing = None

    def forward(self, x, r_prev):
        B, T, D = x.shape
        p, choice, r_next = self.router(x, r_prev)
        w = p.gather(-1, choice.unsqueeze(-1))                       # [B,T,1]
        xf = x.reshape(B * T, D)
        cf = choice.reshape(B * T)
        out = torch.zeros_like(xf)
        for e, expert in enumerate(self.experts.local_experts):
            idx = (cf == e).nonzero(as_tuple=False).squeeze(1)
            if idx.numel():
                out = out.index_add(0, idx, expert(xf.index_select(0, idx)))
        if self.use_mod and not self.skip_outputs_zero:
            idx = (cf == self.n).nonzero(as_tuple=False).squeeze(1)
            if idx.numel():
                out = out.index_add(0, idx, xf.index_select(0, idx))  # skip outputs p·x
        self.last_routing = {"p": p.detach(), "choice": choice.detach()}
        return out.view(B, T, D) * w, r_next


class ZayaAttnLayer(nn.Module):
    def __init__(self, c, i, dtype):
        super().__init__()
        self.self_attn = ZayaAttention(c, dtype, c.windows[i])
        self.input_norm = RMSNorm(c.D, c.eps, dtype)
        self.res_scale = ResidualScaling(c.D, i == 0, dtype)


class ZayaMoELayer(nn.Module):
    def __init__(self, c, i, dtype, router_eps=None):
        super().__init__()
        self.zaya_block = ZayaBlock(c, i, dtype, router_eps)
        self.input_norm = RMSNorm(c.D, c.eps, dtype)
        self.res_scale = ResidualScaling(c.D, i == 0, dtype)


class ZayaModel(nn.Module):
    def __init__(self, c, dtype, router_eps=None):
        super().__init__()
        self.c = c
        # padding_idx: the lookup gradient is not accumulated into the pad row.
        self.embed_tokens = nn.Embedding(c.V, c.D, padding_idx=c.pad_token_id, dtype=dtype)
        self.layers = nn.ModuleList([
            ZayaAttnLayer(c, i, dtype) if c.kinds[i] == "a" else ZayaMoELayer(c, i, dtype, router_eps)
            for i in range(c.L)])
        self.res_scale = ResidualScaling(c.D, False, dtype)
        self.final_norm = RMSNorm(c.D, c.eps, dtype)

    def forward(self, tokens):
        """tokens: int64 [B, T] -> final normed hidden states [B, T, D]  (docs/model.md §6)."""
        c = self.c
        T = tokens.shape[1]
        dtype = self.embed_tokens.weight.dtype
        tables = {th: rope_tables(T, c.r, th, dtype) for th in {c.rope_theta, c.swa_theta}}
        o = self.embed_tokens(tokens)
        h = None
        r_prev = None
        for i, layer in enumerate(self.layers):
            h = layer.res_scale(o, h)
            x = layer.input_norm(h)
            if c.kinds[i] == "a":
                cos, sin = tables[c.swa_theta if c.windows[i] > 0 else c.rope_theta]
                o = layer.self_attn(x, cos, sin)
            else:
                o, r_prev = layer.zaya_block(x, r_prev)
        h = self.res_scale(o, h)
        return self.final_norm(h)


class ZayaTwin(nn.Module):
    """Top-level module; parameter names are the checkpoint names of docs/model.md §2."""

    def __init__(self, cfg, dtype=torch.float64, router_eps=None):
        super().__init__()
        self.config = cfg if isinstance(cfg, ZayaConfig) else ZayaConfig(cfg)
        self.dtype = dtype
        self.model = ZayaModel(self.config, dtype, router_eps)

    def forward(self, tokens):
        f = self.model(tokens)
        return F.linear(f, self.model.embed_tokens.weight)          # tied LM head, [B,T,V]

    def loss(self, tokens, logits=None):
        """Mean CE over positions 0..T-2 of every row predicting token t+1 (no ignore index)."""
        if logits is None:
            logits = self(tokens)
        V = logits.shape[-1]
        lg = logits[:, :-1].reshape(-1, V)
        lg = lg.to(_wide(lg.dtype))
        return F.cross_entropy(lg, tokens[:, 1:].reshape(-1), reduction="mean")

    def train_loss(self, windows):
        """The trainer's reading of a [B, T+1] batch of windows (docs/training.md): the model reads the
        first T tokens of each row and predicts the T after its first; mean CE over B*T."""
        logits = self(windows[:, :-1])
        V = logits.shape[-1]
        lg = logits.reshape(-1, V).to(_wide(logits.dtype))
        return F.cross_entropy(lg, windows[:, 1:].reshape(-1), reduction="mean")

    # ---------------- state handling ----------------
    def named_tensors(self):
        """All checkpoint tensors (parameters + balancing_biases buffers), name -> tensor."""
        out = OrderedDict()
        for n, p in self.named_parameters():
            out[n] = p
        for n, b in self.named_buffers():
            out[n] = b
        return out

    def check_names(self):
        want = param_shapes(self.config)
        have = {n: (tuple(t.shape), "param") for n, t in self.named_parameters()}
        have.update({n: (tuple(t.shape), "buffer") for n, t in self.named_buffers()})
        if dict(want) != have:
            missing = set(want) - set(have)
            extra = set(have) - set(want)
            bad = [n for n in set(want) & set(have) if want[n] != have[n]]
            raise AssertionError(f"name/shape mismatch: missing={missing} extra={extra} bad={bad}")

    @torch.no_grad()
    def load_tensors(self, tensors, strict=True):
        """Load a name -> tensor mapping (any float dtype) into parameters/buffers.
        balancing_biases stay fp32."""
        own = self.named_tensors()
        if strict:
            missing = set(own) - set(tensors)
            extra = set(tensors) - set(own) - {"lm_head.weight"}
            if missing or extra:
                raise KeyError(f"missing={sorted(missing)} unexpected={sorted(extra)}")
        for n, t in tensors.items():
            if n not in own:
                continue
            dst = own[n]
            if tuple(t.shape) != tuple(dst.shape):
                raise ValueError(f"{n}: shape {tuple(t.shape)} != {tuple(dst.shape)}")
            dst.copy_(t.to(dst.dtype))

    @torch.no_grad()
    def round_to_f32_(self):
        """Round every parameter to fp32 values (kept in the compute dtype)."""
        for p in self.parameters():
            p.copy_(p.to(torch.float32).to(p.dtype))

    def routing(self):
        """Routing of the last forward: {layer index: {"p": [B,T,K], "choice": [B,T]}}."""
        out = {}
        for i, layer in enumerate(self.model.layers):
            if isinstance(layer, ZayaMoELayer):
                out[i] = layer.zaya_block.last_routing
        return out


# --------------------------------------------------------------------------------------------
# Initialisation
# --------------------------------------------------------------------------------------------

@torch.no_grad()
def init_spec_(model, gen):
    """docs/model.md §9 (training from scratch, HF defaults)."""
    c = model.config
    for n, p in model.named_parameters():
        if n.endswith(("input_norm.weight", "final_norm.weight", "rmsnorm_eda.weight",
                       "hidden_states_scale", "residual_scale", "router_states_scale")):
            p.fill_(1.0)
        elif n.endswith(("hidden_states_bias", "residual_bias", ".bias", "temp")):
            p.zero_()
        else:
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * 0.02)
    for n, b in model.named_buffers():
        b.zero_()
        if c.use_mod:
            b[-1] = -1.0


@torch.no_grad()
def init_random_test_(model, gen):
    """Random non-default weights for test vectors (activations O(1), attention not uniform)."""
    c = model.config

    def N(shape, std=1.0, mean=0.0):
        return mean + std * torch.randn(shape, generator=gen, dtype=torch.float64)

    for n, p in model.named_parameters():
        s = p.shape
        if n == "model.embed_tokens.weight":
            v = N(s, 1.5 / math.sqrt(c.D))
        elif n.endswith(("input_norm.weight", "final_norm.weight", "rmsnorm_eda.weight")):
            v = N(s, 0.2, 1.0)
        elif n.endswith(("hidden_states_scale", "residual_scale", "router_states_scale")):
            v = N(s, 0.3, 1.0)
        elif n.endswith(("hidden_states_bias", "residual_bias")):
            v = N(s, 0.1)
        elif n.endswith("temp"):
            v = N(s, 0.5, 1.0)
        elif n.endswith("conv_qk.0.weight"):
            v = N(s, 0.5)
        elif n.endswith(("conv_qk.0.bias", "conv_qk.1.bias")):
            v = N(s, 0.3)
        elif n.endswith("conv_qk.1.weight"):
            v = N(s, 1.0 / math.sqrt(2 * c.d))
        elif n.endswith("router_mlp.4.weight"):
            v = N(s, 2.0 / math.sqrt(s[1]))
        elif n.endswith(".bias"):
            v = N(s, 0.1)
        elif p.dim() == 2:
            v = N(s, 1.0 / math.sqrt(s[1]))
        else:
            raise AssertionError(n)
        p.copy_(v.to(p.dtype))
    for n, b in model.named_buffers():
        K = b.shape[0]
        v = N((K,), 0.05).to(torch.float32)
        if c.use_mod:
            v[-1] = -1.0
        b.copy_(v)

"""Optimizer twin (float64) of src/train/: Muon, AdamW, global-norm clipping, LR schedules and the
balancing-bias update, exactly as docs/training.md and docs/model.md §10 and as
src/train/optimizer.h groups parameters. Used by make_optim_vectors.py.

Grouping by parameter name/shape (= ParamKind in src/model/param_layout.h):
  model.embed_tokens.weight      -> AdamW, weight decay (Embedding)
  other 2-D weights              -> Muon, weight decay (Matrix / Expert: each expert its own matrix)
  3-D conv weights               -> AdamW, no decay (Conv)
  1-D tensors                    -> AdamW, no decay (Vector)
  balancing_biases (buffers)     -> only the balancing-bias AdamW, real experts only (the skip entry never moves)
With use_muon False every parameter uses AdamW (2-D weights decayed).
"""
import math

import torch

NS_COEFFS = (3.4445, -4.7750, 2.0315)

DEFAULTS = dict(weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, muon_momentum=0.95,
                muon_nesterov=True, muon_ns_steps=5, muon_rms_scale=0.2, grad_clip=1.0, balance_lr=1e-3,
                balance_beta1=0.9, balance_beta2=0.999, balance_eps=1e-8, use_muon=True)


def newton_schulz(g, steps=5):
    """Quintic Newton-Schulz, short side first, X = G/(|G|_F + 1e-7)."""
    a, b, c = NS_COEFFS
    x = g.to(torch.float64)
    transpose = x.shape[0] > x.shape[1]
    if transpose:
        x = x.t()
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        A = x @ x.t()
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.t() if transpose else x


def schedule_lr(step, kind, warmup, total, peak, floor, decay_fraction=0.2):
    """src/train/schedule.h: step is 0-based, s = step + 1 of S = total; the peak at s = warmup,
    the floor at s = total."""
    s = step + 1
    if s <= warmup:
        return peak * s / warmup
    if kind == "constant":
        return peak
    if kind == "cosine":
        span = total - warmup
        p = 1.0 if span <= 0 else min(max((s - warmup) / span, 0.0), 1.0)
        return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * p))
    if kind == "wsd":
        decay = int(round(decay_fraction * total))
        start = max(warmup, total - decay)
        if s <= start:
            return peak
        if s >= total:
            return floor
        return peak + (floor - peak) * (s - start) / (total - start)
    raise ValueError(kind)


def param_rule(name, p, use_muon):
    """(rule, decay) of a parameter: rule 'muon' or 'adamw'."""
    if name == "model.embed_tokens.weight":
        return "adamw", True
    if p.dim() == 2:
        return ("muon" if use_muon else "adamw"), True
    return "adamw", False


class TwinOptimizer:
    def __init__(self, model, **cfg):
        self.cfg = dict(DEFAULTS)
        self.cfg.update(cfg)
        self.model = model
        self.steps = 0
        self.balance_steps = 0
        self.state = {}
        for n, p in model.named_parameters():
            rule, decay = param_rule(n, p, self.cfg["use_muon"])
            z = torch.zeros_like(p, dtype=torch.float64)
            self.state[n] = (rule, decay, {"buf": z} if rule == "muon" else {"m": z, "v": z.clone()})
        self.bias_state = {}
        for i, layer in enumerate(model.model.layers):
            if hasattr(layer, "zaya_block"):
                n = model.config.n_experts[i]
                self.bias_state[i] = (torch.zeros(n, dtype=torch.float32), torch.zeros(n, dtype=torch.float32))

    def grad_norm(self):
        s = 0.0
        for p in self.model.parameters():
            if p.grad is not None:
                s += float((p.grad.to(torch.float64) ** 2).sum())
        return math.sqrt(s)

    @torch.no_grad()
    def step(self, lr):
        """Clip, update; returns the pre-clip norm (no update when it is not finite)."""
        c = self.cfg
        norm = self.grad_norm()
        if not math.isfinite(norm):
            return norm
        clip = norm > c["grad_clip"] > 0
        self.steps += 1
        t = self.steps
        for n, p in self.model.named_parameters():
            rule, decay, st = self.state[n]
            g = p.grad.to(torch.float64) if p.grad is not None else torch.zeros_like(p, dtype=torch.float64)
            if clip:
                g = g * (c["grad_clip"] / norm)
            wd = c["weight_decay"] if decay else 0.0
            if rule == "muon":
                mu = c["muon_momentum"]
                st["buf"] = mu * st["buf"] + g
                u = g + mu * st["buf"] if c["muon_nesterov"] else st["buf"]
                o = newton_schulz(u, c["muon_ns_steps"])
                scale = c["muon_rms_scale"] * math.sqrt(max(p.shape))
                p.copy_(p * (1 - lr * wd) - lr * scale * o)
            else:
                b1, b2 = c["adam_beta1"], c["adam_beta2"]
                st["m"] = b1 * st["m"] + (1 - b1) * g
                st["v"] = b2 * st["v"] + (1 - b2) * g * g
                mhat = st["m"] / (1 - b1 ** t)
                vhat = st["v"] / (1 - b2 ** t)
                p.copy_(p * (1 - lr * wd) - lr * mhat / (vhat.sqrt() + c["adam_eps"]))
        return norm

    @torch.no_grad()
    def update_balancing_biases(self, counts):
        """counts: {layer: list of K class counts over the global batch} (docs/model.md §10)."""
        c = self.cfg
        self.balance_steps += 1
        t = self.balance_steps
        for i, cnt in counts.items():
            n = self.model.config.n_experts[i]
            total = sum(cnt)
            if total == 0:
                continue
            bb = self.model.model.layers[i].zaya_block.router.balancing_biases
            m, v = self.bias_state[i]
            g = torch.tensor([cnt[e] / total - 1.0 / n for e in range(n)], dtype=torch.float64)
            b1, b2 = c["balance_beta1"], c["balance_beta2"]
            mi = b1 * m.to(torch.float64) + (1 - b1) * g
            vi = b2 * v.to(torch.float64) + (1 - b2) * g * g
            m.copy_(mi.to(torch.float32))
            v.copy_(vi.to(torch.float32))
            upd = (mi / (1 - b1 ** t)) / ((vi / (1 - b2 ** t)).sqrt() + c["balance_eps"])
            bb[:n] = (bb[:n].to(torch.float64) - c["balance_lr"] * upd).to(torch.float32)


def routing_counts(model):
    out = {}
    for i, rt in model.routing().items():
        K = model.config.K(i)
        out[i] = torch.bincount(rt["choice"].reshape(-1), minlength=K).tolist()
    return out

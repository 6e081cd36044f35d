"""Test-only Mamba-1 decode step, written from MODELS.md 1.3 (the per-token form).

Kept apart from weights/reference so a reference/step agreement checks two
independent transcriptions of the math, the same comparison the engine's
step-vs-prefill parity makes.
"""

import math

import torch

from weights.canonical import load_model_dir


def _silu(v):
    return v / (1 + torch.exp(-v))


def _softplus(v):
    return torch.where(v <= 20, torch.log1p(torch.exp(v)), v)


def step_logits(model_dir, tokens, dtype=torch.float64):
    """Run tokens one at a time through per-token state updates; return [T, V]."""
    cfg, raw, _ = load_model_dir(model_dir)
    w = {k: v.to(dtype) for k, v in raw.items()}
    D = cfg["d_model"]
    states = []
    for b in cfg["blocks"]:
        states.append({"c": torch.zeros(b["d_inner"], b["d_conv"] - 1, dtype=dtype),
                       "h": torch.zeros(b["d_inner"], b["d_state"], dtype=dtype)})
    out = []
    for tok in tokens:
        r = w["embed.weight"][tok].clone()
        for i, b in enumerate(cfg["blocks"]):
            p = lambda n: w.get(f"blocks.{i}.{n}")
            E, N, R = b["d_inner"], b["d_state"], b["dt_rank"]
            s = states[i]
            u = p("norm.weight") * r / math.sqrt(float((r * r).sum()) / D + b["norm"]["eps"])
            xz = p("in_proj.weight") @ u
            if p("in_proj.bias") is not None:
                xz = xz + p("in_proj.bias")
            xt, z = xz[:E], xz[E:]
            cw = p("conv.weight")
            acc = (cw[:, :-1] * s["c"]).sum(1) + cw[:, -1] * xt
            if p("conv.bias") is not None:
                acc = acc + p("conv.bias")
            x = _silu(acc)
            s["c"] = torch.cat([s["c"][:, 1:], xt[:, None]], 1)
            dbc = p("x_proj.weight") @ x
            dl, Bv, Cv = dbc[:R], dbc[R:R + N], dbc[R + N:]
            delta = _softplus(p("dt_proj.weight") @ dl + p("dt_proj.bias"))
            s["h"] = torch.exp(delta[:, None] * p("A")) * s["h"] + (delta * x)[:, None] * Bv[None, :]
            y = s["h"] @ Cv + p("D") * x
            o = p("out_proj.weight") @ (y * _silu(z))
            if p("out_proj.bias") is not None:
                o = o + p("out_proj.bias")
            r = r + o
        h = w["final_norm.weight"] * r / math.sqrt(float((r * r).sum()) / D + cfg["final_norm"]["eps"])
        head = w["embed.weight"] if cfg["tie_embeddings"] else w["lm_head.weight"]
        out.append(head @ h)
    return torch.stack(out)

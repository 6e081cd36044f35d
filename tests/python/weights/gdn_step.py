"""Test-only Gated DeltaNet decode step, written from MODELS.md 12.3 (one token,
one value head at a time), apart from weights/reference/gdn.py so that agreement
checks two transcriptions of the math. Stateless kinds (mlp, moe) run through the
reference's full-sequence form, one token at a time."""

import math

import torch

from weights.canonical import load_model_dir
from weights.reference.model import BLOCK_FORWARD


def _silu(x):
    return x / (1 + torch.exp(-x))


def _softplus(x):
    return torch.where(x <= 20, torch.log1p(torch.exp(x)), x)


def _rms(x, w, eps):
    return w * x / math.sqrt(float((x * x).mean()) + eps)


def gdn_step(r, w, b, state, key_head=lambda h, Hk, Hv: h // (Hv // Hk)):
    """One token through one gdn block; w(name) gives the block's tensors; state is
    {"c": [Cc, K-1], "S": [Hv, dk, dv]}, updated in place. Returns the new residual."""
    Hk, Hv, dk, dv = b["n_k_heads"], b["n_v_heads"], b["head_k_dim"], b["head_v_dim"]
    u = _rms(r, w("norm.weight"), b["norm"]["eps"])
    xi = w("in_qkv.weight") @ u
    z, bb, a = w("in_z.weight") @ u, w("in_b.weight") @ u, w("in_a.weight") @ u
    cw = w("conv.weight")
    qkv = _silu((cw[:, :-1] * state["c"]).sum(1) + cw[:, -1] * xi)
    state["c"] = torch.cat([state["c"][:, 1:], xi[:, None]], 1)
    ys = []
    for h in range(Hv):
        kap = key_head(h, Hk, Hv)
        q = qkv[kap * dk:(kap + 1) * dk]
        k = qkv[Hk * dk + kap * dk:Hk * dk + (kap + 1) * dk]
        v = qkv[2 * Hk * dk + h * dv:2 * Hk * dk + (h + 1) * dv]
        q = q / math.sqrt(float((q * q).sum()) + 1e-6) / math.sqrt(dk)
        k = k / math.sqrt(float((k * k).sum()) + 1e-6)
        beta = 1 / (1 + math.exp(-float(bb[h])))
        g = float(w("A")[h]) * float(_softplus(a[h] + w("dt_bias")[h]))
        S = math.exp(g) * state["S"][h]
        m = torch.stack([sum(S[i, j] * k[i] for i in range(dk)) for j in range(dv)])
        delta = beta * (v - m)
        S = S + torch.outer(k, delta)
        state["S"][h] = S
        o = S.t() @ q
        ys.append(_rms(o, w("gated_norm.weight"), b["gated_norm_eps"])
                  * _silu(z[h * dv:(h + 1) * dv]))
    return r + w("out_proj.weight") @ torch.cat(ys)


def step_logits(model_dir, tokens, dtype=torch.float64,
                key_head=lambda h, Hk, Hv: h // (Hv // Hk)):
    """Tokens one at a time through the per-token step; returns logits [T, V]."""
    cfg, raw, _ = load_model_dir(model_dir)
    t = {k: v.to(dtype) for k, v in raw.items()}
    states = []
    for b in cfg["blocks"]:
        if b["kind"] != "gdn":
            states.append(None)
            continue
        C = 2 * b["n_k_heads"] * b["head_k_dim"] + b["n_v_heads"] * b["head_v_dim"]
        states.append({"c": torch.zeros(C, b["d_conv"] - 1, dtype=dtype),
                       "S": torch.zeros(b["n_v_heads"], b["head_k_dim"], b["head_v_dim"],
                                        dtype=dtype)})
    out = []
    for tok in tokens:
        r = t["embed.weight"][tok] * cfg["embed"]["scale"]
        for i, b in enumerate(cfg["blocks"]):
            pre = f"blocks.{i}."
            if b["kind"] == "gdn":
                r = gdn_step(r, lambda n: t[pre + n], b, states[i], key_head)
            else:
                p = {k[len(pre):]: v for k, v in t.items() if k.startswith(pre)}
                r = BLOCK_FORWARD[b["kind"]](r[None], p, b, cfg)[0]
        h = _rms(r, t["final_norm.weight"], cfg["final_norm"]["eps"])
        head = t["embed.weight"] if cfg["tie_embeddings"] else t["lm_head.weight"]
        out.append(head @ h * cfg["logit_scale"])
    return torch.stack(out)

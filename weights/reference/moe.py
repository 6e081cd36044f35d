"""PyTorch reference of the `moe` block (MODELS.md 5, 6.2), token by token.

Each token is routed on its own and only its chosen experts are evaluated,
densely, with that expert's full weights; nothing is grouped or batched, so the
engine's grouped dispatch (gather -> one GEMM per expert -> scatter) is checked
against an independent formulation.

Routing:
  top1_softmax: p = softmax(router(x)); the top_k (default 1) experts by p,
      gate = p_e (Switch: y = p_i* E_i*(x)); with `renormalize` the chosen
      p_e are divided by their sum (Mixtral-style top-k).
  relu_dynamic (ReM 5.3): m = ReLU(router(SiLU(router_in(x)))); every expert
      with m_e > 0 runs with gate m_e.
  sigmoid_group_topk (Nemotron-H, MODELS.md 14.3): s = sigmoid(router(x));
      c = s + router.score_bias picks the topk_group of n_group groups whose
      best two c sum highest, then the top_k c inside them; gate = s_e, divided
      by sum + 1e-20 with `renormalize`.
Every gate is then times `routed_scale` (default 1).
Output r + latent_out(sum_e gate_e * E_e(latent_in x)) + down.bias (shared,
  added once) + s(x) * E_shared(x) with a `shared` expert (MODELS.md 13.4:
  every token runs it on x; s = sigmoid(shared_gate x) when its gate is
  "sigmoid", else 1); without a `latent`, latent_in and latent_out are the
  identity.
E_e(x) = down_e(act(up_e x + up.bias_e)) or down_e(act(gate_e x + ..) * (up_e x + ..)).
"""

import torch
import torch.nn.functional as F

from weights.reference.ffn import activation
from weights.reference.norms import apply_norm


def route(x_t, p, blk):
    """[(expert, gate)] for one token's normed input x_t [D]."""
    if blk["routing"] == "relu_dynamic":
        hidden = F.silu(F.linear(x_t, p["moe.router_in.weight"], p.get("moe.router_in.bias")))
        m = F.relu(F.linear(hidden, p["moe.router.weight"], p.get("moe.router.bias")))
        return [(e, m[e]) for e in range(m.shape[0]) if m[e] > 0]
    if blk["routing"] == "sigmoid_group_topk":
        return sigmoid_group_route(x_t, p, blk)
    if blk["routing"] != "top1_softmax":
        raise ValueError(f"unknown routing {blk['routing']!r}")
    logits = F.linear(x_t, p["moe.router.weight"], p.get("moe.router.bias"))
    probs = torch.softmax(logits, dim=-1)
    k = blk.get("top_k", 1)
    top_p, top_e = torch.topk(probs, k)
    if blk.get("renormalize", False):
        top_p = top_p / top_p.sum()
    return [(int(e), g) for e, g in zip(top_e, top_p)]


def sigmoid_group_route(x_t, p, blk):
    """Nemotron-H's routing of one token, expert by expert."""
    s = torch.sigmoid(F.linear(x_t, p["moe.router.weight"]))
    c = s + p["moe.router.score_bias"]
    X, G = s.shape[0], blk.get("n_group", 1)
    size = X // G
    groups = [torch.topk(c[g * size:(g + 1) * size], min(2, size)).values.sum()
              for g in range(G)]
    kept = sorted(range(G), key=lambda g: -float(groups[g]))[:blk.get("topk_group", 1)]
    allowed = sorted(e for g in kept for e in range(g * size, (g + 1) * size))
    chosen = sorted(allowed, key=lambda e: -float(c[e]))[:blk.get("top_k", 1)]
    gates = [s[e] for e in chosen]
    if blk.get("renormalize", False):
        total = sum(gates) + 1e-20
        gates = [g / total for g in gates]
    return list(zip(chosen, gates))


def expert(x_t, p, blk, e):
    act = activation(blk["act"])
    up_b = p["moe.up.bias"][e] if "moe.up.bias" in p else None
    h = F.linear(x_t, p["moe.up.weight"][e], up_b)
    if blk["gated"]:
        gate_b = p["moe.gate.bias"][e] if "moe.gate.bias" in p else None
        h = act(F.linear(x_t, p["moe.gate.weight"][e], gate_b)) * h
    else:
        h = act(h)
    return F.linear(h, p["moe.down.weight"][e])


def shared_expert(x_t, p, blk):
    act = activation(blk["act"])
    h = F.linear(x_t, p["moe.shared.up.weight"])
    h = act(F.linear(x_t, p["moe.shared.gate.weight"])) * h if blk["gated"] else act(h)
    y = F.linear(h, p["moe.shared.down.weight"])
    if blk["shared"].get("gate") == "sigmoid":
        y = torch.sigmoid(F.linear(x_t, p["moe.shared_gate.weight"])) * y
    return y


def moe_block(r, p, blk, cfg):
    x = apply_norm(r, p, blk["norm"])
    out = torch.zeros_like(r)
    latent = bool(blk.get("latent"))
    scale = blk.get("routed_scale", 1.0)
    for t in range(r.shape[0]):
        xe = F.linear(x[t], p["moe.latent_in.weight"]) if latent else x[t]
        routed = torch.zeros_like(xe)
        for e, g in route(x[t], p, blk):
            routed += scale * g * expert(xe, p, blk, e)
        out[t] += F.linear(routed, p["moe.latent_out.weight"]) if latent else routed
        if blk.get("shared") is not None:
            out[t] += shared_expert(x[t], p, blk)
    if "moe.down.bias" in p:
        out = out + p["moe.down.bias"]
    return r + out

"""PyTorch reference of the `attention` block with an attention-sink KV cache.

Written from MODELS.md 3.1-3.4, 4.2, 9.3 (partial rotary), 10 (rope_scaling) and
13.2 (Qwen3.5's per-head q/k RMSNorm before RoPE and sigmoid output gate) only, as
StreamingLLM's
evaluation path states it: keys are cached before RoPE; after every token the
cache is trimmed to its first S and last W entries; at each step every cached key
is rotated with its index in the cache (0, 1, ..., n-1) and the query with n, the
number of entries cached before it. This module replays that rule literally for every query
position of a whole sequence (a list of cached stream indices, O(T * (S+W))), in
the caller's dtype. It shares nothing with the engine's closed-form positions, its
ring buffer or its fp32 frequency arithmetic, so agreement between the two is
evidence. Each step is one forward pass over positions 0..n, which is the length
dynamic NTK scaling reads.
"""

import math

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm, rmsnorm


def rope_inv_freq(head_dim, theta, scaling, dtype, seq_len):
    """(inv_freq [head_dim/2], attention scaling) of RoPE with the block's
    `rope_scaling` (None or its canonical object), by the formulas of MODELS.md
    10.0-10.4. seq_len: positions spanned by the forward pass, which only
    dynamic NTK reads."""
    d = head_dim
    i = torch.arange(0, d // 2, dtype=dtype)
    plain = 1.0 / theta ** (2 * i / d)
    kind = None if scaling is None else scaling["type"]
    if kind is None:
        return plain, 1.0
    factor = scaling["factor"]
    if kind == "linear":
        return plain / factor, 1.0
    if kind == "dynamic":
        L_max = scaling["max_position_embeddings"]
        if seq_len <= L_max:
            return plain, 1.0
        theta = theta * (factor * seq_len / L_max - (factor - 1)) ** (d / (d - 2))
        return 1.0 / theta ** (2 * i / d), 1.0
    if kind == "llama3":
        L = scaling["original_max_position_embeddings"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        wavelen = 2 * math.pi / plain
        s = (L / wavelen - low) / (high - low)
        blended = (1 - s) * plain / factor + s * plain
        return torch.where(wavelen < L / high, plain,
                           torch.where(wavelen > L / low, plain / factor, blended)), 1.0
    if kind == "yarn":
        L = scaling["original_max_position_embeddings"]

        def correction_dim(rotations):
            return d * math.log(L / (2 * math.pi * rotations)) / (2 * math.log(theta))

        low = max(math.floor(correction_dim(scaling["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(scaling["beta_slow"])), d - 1)
        if low == high:
            high += 0.001
        ramp = ((i - low) / (high - low)).clamp(0, 1)
        return plain * (ramp / factor + (1 - ramp)), scaling["attention_factor"]
    raise ValueError(f"attention reference: rope_scaling type {kind!r} not implemented")


def rope_half(x, positions, rotary_dim, theta, scaling=None):
    """HF Llama half-split RoPE (MODELS.md 3.2) with the block's rope_scaling
    (10) on the first rotary_dim channels of each head; the rest pass unchanged
    (partial rotary, 9.3: the pairs and frequencies are those of a rotary_dim
    RoPE). x: [n, H, d_h]; positions: [n], one forward pass."""
    half = rotary_dim // 2
    dynamic = scaling is not None and scaling["type"] == "dynamic"
    seq_len = int(positions.max()) + 1 if dynamic else None
    inv_freq, attn_scale = rope_inv_freq(rotary_dim, theta, scaling, x.dtype, seq_len)
    angle = positions.to(x.dtype)[:, None] * inv_freq[None, :]          # [n, half]
    cos = (torch.cos(angle) * attn_scale)[:, None, :]
    sin = (torch.sin(angle) * attn_scale)[:, None, :]
    a, b, rest = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def cached_after(cache, sinks, window):
    """StreamingLLM's StartRecentKVCache trim: keep the first S and last W entries."""
    if len(cache) <= sinks + window:
        return cache
    return cache[:sinks] + (cache[len(cache) - window:] if window > 0 else [])


def attention_mixer(x, p, blk):
    """Sink + window attention over a whole sequence from an empty cache.

    x: [T, D] normed residual; p: the block's tensors by short name; blk: its config.
    Returns [T, D] (the output projection included).
    """
    T = x.shape[0]
    Hq, Hkv, dh = blk["n_heads"], blk["n_kv_heads"], blk["head_dim"]
    S, W = blk["sinks"], blk["window"]
    rope = blk["pos"] == "rope_half"
    if blk["pos"] not in ("rope_half", "none"):
        raise ValueError(f"attention reference: pos {blk['pos']!r} not implemented")
    q = F.linear(x, p["attn.q.weight"], p.get("attn.q.bias")).reshape(T, Hq, dh)
    k = F.linear(x, p["attn.k.weight"], p.get("attn.k.bias")).reshape(T, Hkv, dh)
    v = F.linear(x, p["attn.v.weight"], p.get("attn.v.bias")).reshape(T, Hkv, dh)
    qk_norm = blk.get("qk_norm")
    if qk_norm is not None:
        q = rmsnorm(q, p["attn.q_norm.weight"], qk_norm["eps"])
        k = rmsnorm(k, p["attn.k_norm.weight"], qk_norm["eps"])
    group = Hq // Hkv
    kv_head = torch.arange(Hq) // group            # repeat_kv: query head h -> h // group
    out = torch.empty(T, Hq, dh, dtype=x.dtype)
    cache = []                                     # stream indices of cached (un-rotated) keys
    for t in range(T):
        keys = cache + [t]                         # the new token joins the cache first
        idx = torch.tensor(keys)
        n = len(cache)
        kk, vv = k[idx], v[idx]                    # [n+1, Hkv, dh]
        qq = q[t:t + 1]                            # [1, Hq, dh]
        if rope:
            # One forward pass over the cache and the query: positions 0..n.
            theta, scaling = blk["rope_theta"], blk.get("rope_scaling")
            rd = blk.get("rotary_dim") or dh
            kk = rope_half(kk, torch.arange(n + 1), rd, theta, scaling)   # index in the cache
            qq = rope_half(qq, torch.tensor([n]), rd, theta, scaling)     # query: n
        kk, vv = kk[:, kv_head], vv[:, kv_head]    # [n+1, Hq, dh]
        scores = torch.einsum("hd,khd->hk", qq[0], kk)
        # Granite's attention_multiplier replaces 1/sqrt(d_h) (MODELS.md 15.5).
        scores = scores / dh ** 0.5 if blk.get("scale") is None else scores * blk["scale"]
        # Softmax in fp32 at least (float64 stays float64).
        probs = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), dim=-1)
        out[t] = torch.einsum("hk,khd->hd", probs.to(x.dtype), vv)
        cache = cached_after(keys, S, W)
    out = out.reshape(T, Hq * dh)
    gate = blk.get("out_gate")
    if gate is not None:
        if gate != "sigmoid":
            raise ValueError(f"attention reference: out_gate {gate!r} not implemented")
        out = out * torch.sigmoid(F.linear(x, p["attn.gate.weight"], p.get("attn.gate.bias")))
    return F.linear(out, p["attn.o.weight"], p.get("attn.o.bias"))


def attention_block(r, p, blk, cfg):
    """An attention block: r + Attn(Norm(r))."""
    return r + attention_mixer(apply_norm(r, p, blk["norm"]), p, blk)


"""Mapping shared by the HF and mamba_ssm Mamba-1 converters (MODELS.md 1.8 and 6.3).

Both sources use the same per-layer names under `backbone.layers.{i}.`; they
differ only in config fields and the embedding's name, which each converter
module handles before calling `map_tensors`.
"""

import torch

from weights import canonical
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import check_tensors, fp32, map_ends, matrices


def source_shapes(dims, embed_name):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight handled apart)."""
    V, D, E, N, K, R = (dims[k] for k in ("vocab_size", "d_model", "d_inner", "d_state", "d_conv", "dt_rank"))
    s = {embed_name: (V, D), "backbone.norm_f.weight": (D,)}
    for i in range(dims["n_layers"]):
        p = f"backbone.layers.{i}."
        s[p + "norm.weight"] = (D,)
        s[p + "mixer.in_proj.weight"] = (2 * E, D)
        if dims["in_proj_bias"]:
            s[p + "mixer.in_proj.bias"] = (2 * E,)
        s[p + "mixer.conv1d.weight"] = (E, 1, K)
        if dims["conv_bias"]:
            s[p + "mixer.conv1d.bias"] = (E,)
        s[p + "mixer.x_proj.weight"] = (R + 2 * N, E)
        s[p + "mixer.dt_proj.weight"] = (E, R)
        s[p + "mixer.dt_proj.bias"] = (E,)
        s[p + "mixer.A_log"] = (E, N)
        s[p + "mixer.D"] = (E,)
        s[p + "mixer.out_proj.weight"] = (D, E)
        if dims["out_proj_bias"]:
            s[p + "mixer.out_proj.bias"] = (D,)
    return s


def map_tensors(tensors, dims, embed_name, tied, dtype):
    """Source tensors -> canonical Lazy tensors (matrices in `dtype`, A/D/dt bias in fp32)."""
    # mamba_ssm checkpoints follow the HF tensor rules too: lm_head.weight only
    # when untied (or equal to the embedding), nothing unknown, all floating point.
    check_tensors(tensors, source_shapes(dims, embed_name), embed_name, tied)

    mat, f32 = matrices(tensors, dtype), fp32(tensors)
    out = map_ends(mat, embed_name, "backbone.norm_f.weight", tied)
    for i in range(dims["n_layers"]):
        s, c = f"backbone.layers.{i}.", f"blocks.{i}."
        out[c + "norm.weight"] = mat(s + "norm.weight")
        out[c + "in_proj.weight"] = mat(s + "mixer.in_proj.weight")
        if dims["in_proj_bias"]:
            out[c + "in_proj.bias"] = mat(s + "mixer.in_proj.bias")
        out[c + "conv.weight"] = mat(s + "mixer.conv1d.weight").map(lambda w: w.squeeze(1))
        if dims["conv_bias"]:
            out[c + "conv.bias"] = mat(s + "mixer.conv1d.bias")
        out[c + "x_proj.weight"] = mat(s + "mixer.x_proj.weight")
        out[c + "dt_proj.weight"] = mat(s + "mixer.dt_proj.weight")
        # No softplus here: it acts on W_dt d + b_dt at run time (MODELS.md 1.8.4).
        out[c + "dt_proj.bias"] = f32(s + "mixer.dt_proj.bias")
        # The reference computes -exp(A_log) in fp32 on every call; do it once, same arithmetic.
        out[c + "A"] = f32(s + "mixer.A_log").map(lambda a: -torch.exp(a))
        out[c + "D"] = f32(s + "mixer.D")
        out[c + "out_proj.weight"] = mat(s + "mixer.out_proj.weight")
        if dims["out_proj_bias"]:
            out[c + "out_proj.bias"] = mat(s + "mixer.out_proj.bias")
    return out


def canonical_config(dims, name, tied, eps, eos_token_id, bos_token_id):
    return canonical.mamba_config(
        name=name, vocab_size=dims["vocab_size"], d_model=dims["d_model"],
        n_layers=dims["n_layers"], d_inner=dims["d_inner"], d_state=dims["d_state"],
        d_conv=dims["d_conv"], dt_rank=dims["dt_rank"], eps=eps, tie_embeddings=tied,
        in_proj_bias=dims["in_proj_bias"], out_proj_bias=dims["out_proj_bias"],
        conv_bias=dims["conv_bias"], eos_token_id=eos_token_id, bos_token_id=bos_token_id)


def positive_int(cfg, key, where="config"):
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConvertError(f"{where}: field {key!r} must be a positive integer, got {v!r}")
    return v

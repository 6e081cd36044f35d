"""Hugging Face `Mamba2ForCausalLM` checkpoint (save_pretrained layout) -> canonical.

Reads config.json (MODELS.md 7.10) and the weights in any layout save_pretrained
writes: model.safetensors or pytorch_model.bin, single or sharded
(weights/converters/hf_checkpoint.py). A field absent from config.json takes
Mamba2Config's default (transformers 4.48.3), as transformers itself would; note
that n_groups then defaults to 8 and tie_word_embeddings to false (MODELS.md
7.13).

What the engine computes is mamba_ssm's Mamba-2: for n_groups > 1 head h reads
B/C group h // (H/G) and the gated RMSNorm is per group, which is what
mamba_ssm, and so Mamba-Codestral, runs; transformers 4.48.3 tiles heads over
groups in prefill and normalises ungrouped, so for G > 1 the engine follows the
checkpoint's own code rather than transformers (G = 1, every state-spaces
model, is the same under both).

A time_step_limit other than the default (0, inf) converts with a warning:
the engine clamps dt in prefill and decode alike, as transformers' torch path
does, where mamba_ssm clamps it in prefill only (MODELS.md 7.7).

Refused, naming the field or tensor: another architecture, hidden_act other
than silu, rms_norm false, norm_before_gate true, num_heads * head_dim other
than int(expand * hidden_size), n_groups not dividing num_heads, a
time_step_limit that is not [lo >= 0, hi >= lo], and any tensor that is
missing, unknown or mis-shaped.
"""

import math
import warnings

import torch

from weights import canonical
from weights.converters.convert_error import ConvertError, ConvertWarning
from weights.converters.hf_checkpoint import (check_tensors, fp32, load_tensors, map_ends,
                                              matrices)
from weights.converters.hf_config import (boolean, canonical_config, check_architecture,
                                          load_config, positive_number)
from weights.converters.mamba_common import positive_int

NAME = "hf-mamba2"
EMBED = "backbone.embeddings.weight"

# Mamba2Config's defaults (transformers 4.48.3 configuration_mamba2.py).
DEFAULTS = {"num_heads": 128, "head_dim": 64, "vocab_size": 32768, "hidden_size": 4096,
            "state_size": 128, "num_hidden_layers": 64, "expand": 2, "conv_kernel": 4,
            "n_groups": 8, "chunk_size": 256}


def _int(cfg, key):
    """cfg[key], or Mamba2Config's default when absent, as a positive integer."""
    return positive_int({key: cfg.get(key, DEFAULTS[key])}, key)


def time_step_limit(v, field="time_step_limit"):
    """(dt_min, dt_max or None for unbounded) from a [lo, hi] pair, which JSON
    spells [0.0, Infinity] by default."""
    ok = (isinstance(v, (list, tuple)) and len(v) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
          and not any(math.isnan(x) for x in v) and math.isfinite(v[0]) and 0 <= v[0] <= v[1])
    if not ok:
        raise ConvertError(f"config: field '{field}' must be [lo, hi] with "
                           f"0 <= lo <= hi, got {v!r}")
    lo, hi = float(v[0]), (None if math.isinf(v[1]) else float(v[1]))
    if lo != 0.0 or hi is not None:
        warnings.warn(
            f"{field} {list(v)} is not the default (0, inf): the engine clamps dt in prefill "
            "and decode alike, as transformers' torch path does, while mamba_ssm and "
            "transformers' CUDA path clamp it in prefill only (MODELS.md 7.7), so decode may "
            "differ from what those ran", ConvertWarning, stacklevel=2)
    return lo, hi


def read_dims(cfg):
    """Canonical dimensions and block fields from an HF Mamba-2 config dict."""
    check_architecture(cfg, "mamba2", "Mamba2ForCausalLM")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config: hidden_act {cfg['hidden_act']!r} unsupported (only silu)")
    # transformers ignores rms_norm and always normalises; mamba_ssm's rmsnorm=False
    # means no norm at all, so a checkpoint saying so was not trained with one.
    if not boolean(cfg, "rms_norm", True):
        raise ConvertError("config: field 'rms_norm' false (no gated norm) is unsupported")
    if boolean(cfg, "norm_before_gate", False):
        raise ConvertError("config: field 'norm_before_gate' true is unsupported (only the "
                           "gate before the norm, as every released checkpoint)")
    D = _int(cfg, "hidden_size")
    expand = positive_number(cfg, "expand", DEFAULTS["expand"])
    E = int(expand * D)
    H, P = _int(cfg, "num_heads"), _int(cfg, "head_dim")
    if H * P != E:
        raise ConvertError(f"config: fields 'num_heads' {H} x 'head_dim' {P} = {H * P} must "
                           f"equal int(expand * hidden_size) = {E}")
    G = _int(cfg, "n_groups")
    if H % G:
        raise ConvertError(f"config: field 'n_groups' {G} does not divide num_heads {H}")
    _int(cfg, "chunk_size")         # only rounding depends on it (MODELS.md 7.13)
    bias = boolean(cfg, "use_bias", False)
    dt_min, dt_max = time_step_limit(cfg.get("time_step_limit", [0.0, math.inf]))
    eps = positive_number(cfg, "layer_norm_epsilon", 1e-5)
    return {"vocab_size": _int(cfg, "vocab_size"), "d_model": D,
            "n_layers": _int(cfg, "num_hidden_layers"), "n_heads": H, "head_dim": P,
            "d_state": _int(cfg, "state_size"), "n_groups": G, "d_conv": _int(cfg, "conv_kernel"),
            "in_proj_bias": bias, "out_proj_bias": bias,
            "conv_bias": boolean(cfg, "use_conv_bias", True), "dt_min": dt_min, "dt_max": dt_max,
            "eps": eps}


def mixer_shapes(p, dims):
    """{source tensor name: shape} of one Mamba-2 mixer whose names start with
    `p` (transformers' Mamba2Mixer; BambaMixer has the same tensors)."""
    D, H, P, N, G, K = (dims[k] for k in ("d_model", "n_heads", "head_dim", "d_state",
                                          "n_groups", "d_conv"))
    E = H * P
    conv = E + 2 * G * N
    rows = E + conv + H
    s = {p + "in_proj.weight": (rows, D), p + "conv1d.weight": (conv, 1, K),
         p + "dt_bias": (H,), p + "A_log": (H,), p + "D": (H,), p + "norm.weight": (E,),
         p + "out_proj.weight": (D, E)}
    if dims["in_proj_bias"]:
        s[p + "in_proj.bias"] = (rows,)
    if dims["conv_bias"]:
        s[p + "conv1d.bias"] = (conv,)
    if dims["out_proj_bias"]:
        s[p + "out_proj.bias"] = (D,)
    return s


def source_shapes(dims, embed_name):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight handled apart)."""
    V, D = dims["vocab_size"], dims["d_model"]
    s = {embed_name: (V, D), "backbone.norm_f.weight": (D,)}
    for i in range(dims["n_layers"]):
        p = f"backbone.layers.{i}."
        s[p + "norm.weight"] = (D,)
        s.update(mixer_shapes(p + "mixer.", dims))
    return s



def mamba_fields(cfg, D):
    """(heads H, head_dim P, groups G) of the Mamba-2 mixer that Bamba and
    Granite-4.0-H describe alike (mamba_expand, mamba_n_heads, mamba_d_head
    "auto" or a number, mamba_n_groups, mamba_chunk_size), checked:
    H x P = mamba_expand x hidden_size D, G divides H."""
    expand = cfg["mamba_expand"]
    if isinstance(expand, bool) or not isinstance(expand, int) or expand <= 0:
        raise ConvertError(f"config: field 'mamba_expand' must be a positive integer, "
                           f"got {expand!r}")
    E = expand * D
    H = positive_int(cfg, "mamba_n_heads")
    P = E // H if cfg["mamba_d_head"] == "auto" else positive_int(cfg, "mamba_d_head")
    if H * P != E:
        raise ConvertError(f"config: fields 'mamba_n_heads' {H} x 'mamba_d_head' "
                           f"{cfg['mamba_d_head']!r} must equal mamba_expand x hidden_size "
                           f"= {E}")
    G = positive_int(cfg, "mamba_n_groups")
    if H % G:
        raise ConvertError(f"config: field 'mamba_n_groups' {G} does not divide "
                           f"mamba_n_heads {H}")
    positive_int(cfg, "mamba_chunk_size")     # only rounding depends on it (MODELS.md 7.13)
    return H, P, G


def map_mixer(tensors, s, c, dims, dtype):
    """The canonical Lazy tensors (prefix `c`) of the Mamba-2 mixer whose source
    names start with `s`: matrices in `dtype`; A, D, dt_bias fp32."""
    def mat(name):
        return matrices(tensors, dtype)(s + name)

    def f32(name):
        return fp32(tensors)(s + name)

    out = {c + "in_proj.weight": mat("in_proj.weight"),
           c + "conv.weight": mat("conv1d.weight").map(lambda w: w.squeeze(1))}
    if dims["in_proj_bias"]:
        out[c + "in_proj.bias"] = mat("in_proj.bias")
    if dims["conv_bias"]:
        out[c + "conv.bias"] = mat("conv1d.bias")
    # Softplus stays a run-time step on dt + dt_bias (MODELS.md 7.12).
    out[c + "dt_bias"] = f32("dt_bias")
    # Both references compute -exp(A_log) in fp32 on every call; do it once.
    out[c + "A"] = f32("A_log").map(lambda a: -torch.exp(a))
    out[c + "D"] = f32("D")
    out[c + "gated_norm.weight"] = mat("norm.weight")
    out[c + "out_proj.weight"] = mat("out_proj.weight")
    if dims["out_proj_bias"]:
        out[c + "out_proj.bias"] = mat("out_proj.bias")
    return out


def map_tensors(tensors, dims, embed_name, tied, dtype):
    """Source tensors -> canonical tensors (matrices in `dtype`; A, D, dt_bias fp32)."""
    check_tensors(tensors, source_shapes(dims, embed_name), embed_name, tied)
    mat = matrices(tensors, dtype)
    out = map_ends(mat, embed_name, "backbone.norm_f.weight", tied)
    for i in range(dims["n_layers"]):
        out[f"blocks.{i}.norm.weight"] = mat(f"backbone.layers.{i}.norm.weight")
        out.update(map_mixer(tensors, f"backbone.layers.{i}.mixer.", f"blocks.{i}.", dims,
                             dtype))
    return out


def block(dims):
    """The canonical mamba2 block; HF uses one eps for the block norm and the
    gated norm alike, mamba_ssm a gated_norm_eps of its own."""
    return canonical.mamba2_block(
        n_heads=dims["n_heads"], head_dim=dims["head_dim"], d_state=dims["d_state"],
        n_groups=dims["n_groups"], d_conv=dims["d_conv"], eps=dims["eps"],
        in_proj_bias=dims["in_proj_bias"], out_proj_bias=dims["out_proj_bias"],
        conv_bias=dims["conv_bias"], dt_min=dims["dt_min"], dt_max=dims["dt_max"],
        gated_norm_eps=dims.get("gated_norm_eps", dims["eps"]))


def blocks(dims):
    """The canonical mamba2 blocks."""
    return [block(dims) for _ in range(dims["n_layers"])]


def convert(src, dtype):
    """Return (canonical config, canonical tensors) for an HF Mamba-2 directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    tied = boolean(cfg, "tie_word_embeddings", False)
    tensors = map_tensors(load_tensors(src), dims, EMBED, tied, dtype)
    return canonical_config(cfg, src, dims, tied, blocks(dims)), tensors

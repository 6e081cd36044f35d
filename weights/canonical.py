"""The canonical model directory (MODELS.md section 6): config, tensor set, tokenizer.

One place that knows which tensors a canonical Mamba-1 model must hold and with
which shapes, so the converters, the reference and the random-model maker all
agree with each other and with the C++ loader.
"""

import json
import os
import shutil
import tempfile

import torch

from weights import safetensors_io

FORMAT = "seqboat-canonical"
VERSION = 1
BYTE_VOCAB = 264      # 256 bytes + EOS, padded to a multiple of 8
BYTE_EOS = 256

# Tensors whose recurrence role needs full precision regardless of the model dtype:
# mamba1's and mamba2's dt bias, A and D (s4d.D matches ".D"), gdn's A and dt_bias,
# s4d's recurrence, and seqboat's derived MD-EMA coefficients and configurator temperature.
FP32_SUFFIXES = ("dt_proj.bias", ".dt_bias", ".A", ".D", "s4d.dA", "s4d.C",
                 "ema.in_coef", "ema.decay", "ema.out_coef", "ema.skip", "router.temperature")

# Kept fp32 by converters whatever the model dtype, but not required: MODELS.md
# routes experts in fp32, and a rounded router flips near-tied expert choices.
# Files written before this rule hold them in the model dtype and still load.
ROUTER_SUFFIXES = ("moe.router.weight", "moe.router.bias", "moe.router_in.weight",
                   "moe.router_in.bias", "moe.shared_gate.weight", "moe.router.score_bias")

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


class CanonicalError(ValueError):
    """A canonical directory or tensor set that does not follow MODELS.md section 6."""


def byte_tokenizer():
    """The byte-level tokenizer.json the C++ side parses (ids 0..255 = bytes, 256 = EOS)."""
    return {"version": "1.0", "model": {"type": "Bytes"},
            "added_tokens": [{"id": BYTE_EOS, "content": "<|endoftext|>", "special": True}]}


def mamba_config(*, name, vocab_size, d_model, n_layers, d_inner, d_state, d_conv, dt_rank,
                 eps=1e-5, tie_embeddings=True, in_proj_bias=False, out_proj_bias=False,
                 conv_bias=True, dt_bc_norm=None, eos_token_id=None, bos_token_id=None):
    """A canonical config.json dict for a pure Mamba-1 stack.

    dt_bc_norm: None, or the norm object of Jamba's dt/B/C RMSNorms (e.g.
    {"type": "rmsnorm", "eps": 1e-6}); the field is written only when set.
    """
    block = {"kind": "mamba1", "norm": {"type": "rmsnorm", "eps": eps},
             "d_inner": d_inner, "d_state": d_state, "d_conv": d_conv, "dt_rank": dt_rank,
             "in_proj_bias": in_proj_bias, "out_proj_bias": out_proj_bias, "conv_bias": conv_bias}
    if dt_bc_norm is not None:
        block["dt_bc_norm"] = dict(dt_bc_norm)
    return model_config(name=name, vocab_size=vocab_size, d_model=d_model,
                        tie_embeddings=tie_embeddings,
                        final_norm={"type": "rmsnorm", "eps": eps, "affine": True},
                        eos_token_id=eos_token_id, bos_token_id=bos_token_id,
                        blocks=[json.loads(json.dumps(block)) for _ in range(n_layers)])


def mamba2_block(*, n_heads, head_dim, d_state, n_groups, d_conv, eps=1e-5,
                 in_proj_bias=False, out_proj_bias=False, conv_bias=True, dt_min=0.0,
                 dt_max=None, gated_norm_eps=1e-5):
    """A canonical mamba2 block dict (d_inner = n_heads * head_dim; dt_max None is
    unbounded, since JSON has no infinity)."""
    return {"kind": "mamba2", "norm": {"type": "rmsnorm", "eps": eps},
            "n_heads": n_heads, "head_dim": head_dim, "d_state": d_state,
            "n_groups": n_groups, "d_conv": d_conv, "in_proj_bias": in_proj_bias,
            "out_proj_bias": out_proj_bias, "conv_bias": conv_bias,
            "dt_min": dt_min, "dt_max": dt_max, "gated_norm_eps": gated_norm_eps}


def gdn_block(*, n_k_heads, n_v_heads, head_k_dim, head_v_dim, d_conv=4, eps=1e-6,
              gated_norm_eps=1e-6):
    """A canonical gdn (Gated DeltaNet, MODELS.md 12) block dict; value head h reads
    key head h // (n_v_heads / n_k_heads)."""
    return {"kind": "gdn", "norm": {"type": "rmsnorm", "eps": eps},
            "n_k_heads": n_k_heads, "n_v_heads": n_v_heads, "head_k_dim": head_k_dim,
            "head_v_dim": head_v_dim, "d_conv": d_conv, "gated_norm_eps": gated_norm_eps}


def model_config(*, name, vocab_size, d_model, tie_embeddings, final_norm, eos_token_id,
                 bos_token_id, blocks, embed_scale=1.0, padding_idx=None):
    """A canonical config.json dict around a list of block dicts. Logits are not
    scaled and the residual stream is fp32: no source here asks otherwise."""
    return {"format": FORMAT, "version": VERSION, "name": name,
            "vocab_size": vocab_size, "d_model": d_model,
            "embed": {"scale": embed_scale, "padding_idx": padding_idx},
            "tie_embeddings": tie_embeddings, "logit_scale": 1.0, "final_norm": final_norm,
            "residual_dtype": "float32",
            "eos_token_id": eos_token_id, "bos_token_id": bos_token_id,
            "blocks": blocks}


def norm_shapes(prefix, norm, d_model):
    """Tensors of a block's or the model's norm config (None means no norm)."""
    if norm is None:
        return {}
    kind = norm.get("type")
    if kind not in NORM_TYPES:
        raise CanonicalError(f"config: {prefix or 'final_'}norm type {kind!r} unsupported")
    if not norm.get("affine", True):
        return {}
    shapes = {prefix + "weight": (d_model,)}
    if kind == "layernorm":
        shapes[prefix + "bias"] = (d_model,)
    elif kind == "scalenorm":
        shapes = {prefix + "scalar": (1,)}
    return shapes


def mamba1_shapes(p, b, d_model):
    """Canonical tensors of a mamba1 block (MODELS.md 6.2), norm excluded."""
    E, N, K, R = b["d_inner"], b["d_state"], b["d_conv"], b["dt_rank"]
    shapes = {p + "in_proj.weight": (2 * E, d_model)}
    if b["in_proj_bias"]:
        shapes[p + "in_proj.bias"] = (2 * E,)
    shapes[p + "conv.weight"] = (E, K)
    if b["conv_bias"]:
        shapes[p + "conv.bias"] = (E,)
    shapes[p + "x_proj.weight"] = (R + 2 * N, E)
    shapes.update(dt_bc_norm_shapes(p, b))
    shapes[p + "dt_proj.weight"] = (E, R)
    shapes[p + "dt_proj.bias"] = (E,)
    shapes[p + "A"] = (E, N)
    shapes[p + "D"] = (E,)
    shapes[p + "out_proj.weight"] = (d_model, E)
    if b["out_proj_bias"]:
        shapes[p + "out_proj.bias"] = (d_model,)
    return shapes


def mamba2_shapes(p, b, d_model):
    """Canonical tensors of a mamba2 block, norm excluded: in_proj rows are
    [z (E) ; xBC (E + 2GN) ; dt (H)], the conv runs over xBC."""
    H, P, N, G, K = (b[k] for k in ("n_heads", "head_dim", "d_state", "n_groups", "d_conv"))
    E = H * P
    conv = E + 2 * G * N
    rows = E + conv + H
    shapes = {p + "in_proj.weight": (rows, d_model)}
    if b["in_proj_bias"]:
        shapes[p + "in_proj.bias"] = (rows,)
    shapes[p + "conv.weight"] = (conv, K)
    if b["conv_bias"]:
        shapes[p + "conv.bias"] = (conv,)
    shapes[p + "dt_bias"] = (H,)
    shapes[p + "A"] = (H,)
    shapes[p + "D"] = (H,)
    if b.get("gate", "norm_after_gate") != "silu":     # "silu": y ⊙ SiLU(z), no norm
        shapes[p + "gated_norm.weight"] = (E,)
    shapes[p + "out_proj.weight"] = (d_model, E)
    if b["out_proj_bias"]:
        shapes[p + "out_proj.bias"] = (d_model,)
    return shapes


def _positive_int(p, b, key):
    v = b.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise CanonicalError(f"config: {p}{key} must be a positive integer, got {v!r}")
    return v


def _positive_number(p, b, key):
    v = b.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
        raise CanonicalError(f"config: {p}{key} must be a positive number, got {v!r}")
    return v


def gdn_shapes(p, b, d_model):
    """Canonical tensors of a gdn block (MODELS.md 12.5), norm excluded: in_qkv rows
    are [q (Hk*dk) ; k (Hk*dk) ; v (Hv*dv)], each head-major, and the conv runs over
    all of them; no biases. Raises CanonicalError naming a bad field."""
    Hk, Hv, dk, dv, K = (_positive_int(p, b, k) for k in
                         ("n_k_heads", "n_v_heads", "head_k_dim", "head_v_dim", "d_conv"))
    if Hv % Hk:
        raise CanonicalError(f"config: {p}n_v_heads ({Hv}) must be a multiple of "
                             f"{p}n_k_heads ({Hk})")
    _positive_number(p, b, "gated_norm_eps")
    conv = 2 * Hk * dk + Hv * dv
    return {p + "in_qkv.weight": (conv, d_model), p + "in_z.weight": (Hv * dv, d_model),
            p + "in_b.weight": (Hv, d_model), p + "in_a.weight": (Hv, d_model),
            p + "conv.weight": (conv, K), p + "A": (Hv,), p + "dt_bias": (Hv,),
            p + "gated_norm.weight": (dv,), p + "out_proj.weight": (d_model, Hv * dv)}


def dt_bc_norm_shapes(p, b):
    """Jamba's RMSNorms over the dt, B and C slices of x_proj's output, when the
    mamba1 block has a `dt_bc_norm` (null or absent: none)."""
    norm = b.get("dt_bc_norm")
    if norm is None:
        return {}
    if norm.get("type") != "rmsnorm":
        raise CanonicalError(f"config: mamba1 dt_bc_norm type {norm.get('type')!r} unsupported "
                             "(only rmsnorm)")
    if not norm.get("affine", True):
        return {}
    R, N = b["dt_rank"], b["d_state"]
    return {p + "dt_norm.weight": (R,), p + "b_norm.weight": (N,), p + "c_norm.weight": (N,)}


def seqboat_shapes(p, b, d_model):
    """Canonical tensors of a seqboat block (MODELS.md 6.2), norm excluded."""
    D, Ne, z, v = d_model, b["ema_dim"], b["z_dim"], b["v_dim"]
    shapes = {p + "ema.in_coef": (D, Ne), p + "ema.decay": (D, Ne),
              p + "ema.out_coef": (D, Ne), p + "ema.skip": (D,),
              p + "router.weight": (2, D), p + "router.bias": (2,),
              p + "router.temperature": (1,),
              p + "hx.weight": (D, D), p + "hx.bias": (D,),
              p + "gau.in_proj.weight": (z + 2 * v, D), p + "gau.in_proj.bias": (z + 2 * v,),
              p + "gau.qk_gamma": (2, z), p + "gau.qk_beta": (2, z),
              p + "gau.out_proj.weight": (D, v), p + "gau.out_proj.bias": (D,)}
    if b.get("pos") == "simple_bias":
        shapes[p + "gau.rel_pos_bias"] = (2 * b["rel_pos_max"] - 1,)
    return shapes



def attention_shapes(p, b, d_model):
    """Canonical tensors of an attention block (MODELS.md 6.2), norm excluded."""
    qd, kd = b["n_heads"] * b["head_dim"], b["n_kv_heads"] * b["head_dim"]
    shapes = {p + "attn.q.weight": (qd, d_model), p + "attn.k.weight": (kd, d_model),
              p + "attn.v.weight": (kd, d_model), p + "attn.o.weight": (d_model, qd)}
    if b["qkv_bias"]:
        shapes.update({p + "attn.q.bias": (qd,), p + "attn.k.bias": (kd,),
                       p + "attn.v.bias": (kd,)})
    if b["o_bias"]:
        shapes[p + "attn.o.bias"] = (d_model,)
    if b.get("out_gate") is not None:     # Qwen3.5's sigmoid gate on the heads' output
        shapes[p + "attn.gate.weight"] = (qd, d_model)
        if b["qkv_bias"]:
            shapes[p + "attn.gate.bias"] = (qd,)
    if b.get("qk_norm") is not None:      # per-head RMSNorm of q and k, weights [d_h]
        shapes[p + "attn.q_norm.weight"] = (b["head_dim"],)
        shapes[p + "attn.k_norm.weight"] = (b["head_dim"],)
    return shapes


def mlp_shapes(p, b, d_model):
    """Canonical tensors of an mlp block, norm excluded."""
    F_, D = b["d_ff"], d_model
    shapes = {p + "mlp.up.weight": (F_, D), p + "mlp.down.weight": (D, F_)}
    if b["gated"]:
        shapes[p + "mlp.gate.weight"] = (F_, D)
    if b["bias"]:
        shapes[p + "mlp.up.bias"] = (F_,)
        shapes[p + "mlp.down.bias"] = (D,)
        if b["gated"]:
            shapes[p + "mlp.gate.bias"] = (F_,)
    return shapes


def moe_shapes(p, b, d_model):
    """Canonical tensors of a moe block, norm excluded.

    relu_dynamic adds router_in [h, D] (h = router_hidden) and its router is
    [X, h]; router_bias covers both router layers; expert_bias adds up.bias
    [X, F] (gate.bias [X, F] when gated) and the shared down.bias [D]; a
    `shared` expert {"d_ff": Fs, "gate": "sigmoid" or null} adds shared.up /
    shared.gate [Fs, D], shared.down [D, Fs] and, gated, shared_gate [1, D].
    sigmoid_group_topk adds router.score_bias [X]; a `latent` L adds
    latent_in [L, D] and latent_out [D, L], and the experts read and write L
    wide (up [X, F, L], down [X, L, F]).
    """
    X, F_, D = b["n_experts"], b["d_ff"], d_model
    Din = b.get("latent") or D
    relu = b["routing"] == "relu_dynamic"
    shapes = {}
    if relu:
        h = b["router_hidden"]
        shapes[p + "moe.router_in.weight"] = (h, D)
        if b["router_bias"]:
            shapes[p + "moe.router_in.bias"] = (h,)
    shapes[p + "moe.router.weight"] = (X, b["router_hidden"] if relu else D)
    if b["router_bias"]:
        shapes[p + "moe.router.bias"] = (X,)
    if b["routing"] == "sigmoid_group_topk":
        shapes[p + "moe.router.score_bias"] = (X,)
    if b.get("latent"):
        shapes[p + "moe.latent_in.weight"] = (Din, D)
        shapes[p + "moe.latent_out.weight"] = (D, Din)
    shapes[p + "moe.up.weight"] = (X, F_, Din)
    if b["gated"]:
        shapes[p + "moe.gate.weight"] = (X, F_, Din)
    shapes[p + "moe.down.weight"] = (X, Din, F_)
    if b["expert_bias"]:
        shapes[p + "moe.up.bias"] = (X, F_)
        if b["gated"]:
            shapes[p + "moe.gate.bias"] = (X, F_)
        shapes[p + "moe.down.bias"] = (D,)
    shared = b.get("shared")
    if shared is not None:     # an expert every token runs (Qwen3.5-MoE, Qwen3-Next)
        Fs = shared["d_ff"]
        shapes[p + "moe.shared.up.weight"] = (Fs, D)
        if b["gated"]:
            shapes[p + "moe.shared.gate.weight"] = (Fs, D)
        shapes[p + "moe.shared.down.weight"] = (D, Fs)
        if shared.get("gate") == "sigmoid":
            shapes[p + "moe.shared_gate.weight"] = (1, D)
    return shapes


def s4d_shapes(p, b, d_model):
    """Canonical tensors of an s4d block over H = d_model channels, norm excluded."""
    H, M, ch = d_model, b["modes"], b["channels"]
    shapes = {p + "s4d.dA": (H, M, 2), p + "s4d.C": (ch, H, M, 2), p + "s4d.D": (ch, H)}
    if b["output"] == "gelu_glu":
        shapes[p + "s4d.out.weight"] = (2 * H, ch * H)
        shapes[p + "s4d.out.bias"] = (2 * H,)
    return shapes


def parallel_mamba2_attention_shapes(p, b, d_model):
    """Canonical tensors of a parallel_mamba2_attention block (MODELS.md 16.1), its one
    norm excluded: the mamba2 operator's under mamba., the attention's attn.*."""
    return {**mamba2_shapes(p + "mamba.", b["mamba2"], d_model),
            **attention_shapes(p, b["attention"], d_model)}


NORM_TYPES = ("rmsnorm", "layernorm", "rmsnorm_t5", "scalenorm")

# Block kind -> function(prefix, block config, d_model) -> {name: shape}, norm
# excluded. Each layer kind registers itself here (one entry per kind).
BLOCK_SHAPES = {
    "mamba1": mamba1_shapes,
    "mamba2": mamba2_shapes,
    "gdn": gdn_shapes,
    "seqboat": seqboat_shapes,
    "attention": attention_shapes,
    "mlp": mlp_shapes,
    "moe": moe_shapes,
    "s4d": s4d_shapes,
    "parallel_mamba2_attention": parallel_mamba2_attention_shapes,
}


def expected_shapes(config):
    """{canonical tensor name: shape} for a config; raises CanonicalError on a bad config."""
    for key in ("format", "version", "vocab_size", "d_model", "blocks", "tie_embeddings"):
        if key not in config:
            raise CanonicalError(f"config: missing field {key!r}")
    if config["format"] != FORMAT or config["version"] != VERSION:
        raise CanonicalError(f"config: not {FORMAT} v{VERSION}")
    V, D = config["vocab_size"], config["d_model"]
    shapes = {"embed.weight": (V, D)}
    shapes.update(norm_shapes("final_norm.", config.get("final_norm"), D))
    if not config["tie_embeddings"]:
        shapes["lm_head.weight"] = (V, D)
    for i, b in enumerate(config["blocks"]):
        kind = b.get("kind")
        if kind not in BLOCK_SHAPES:
            raise CanonicalError(f"config: blocks[{i}] kind {kind!r} is not supported")
        p = f"blocks.{i}."
        shapes.update(norm_shapes(p + "norm.", b.get("norm"), D))
        shapes.update(BLOCK_SHAPES[kind](p, b, D))
    return shapes


def is_fp32_only(name):
    """True for tensors MODELS.md 1.8 requires in fp32 (A, D, dt_proj.bias)."""
    return name.endswith(FP32_SUFFIXES)


def stored_dtype(name, dtype):
    """The dtype a converter writes tensor `name` in for a model of `dtype`."""
    return torch.float32 if name.endswith(FP32_SUFFIXES + ROUTER_SUFFIXES) else dtype


def check_tensors(config, tensors):
    """Raise CanonicalError naming the first missing, unknown, mis-shaped or mis-typed tensor."""
    shapes = expected_shapes(config)
    for name in sorted(shapes):
        if name not in tensors:
            raise CanonicalError(f"missing tensor {name!r}")
    for name in sorted(tensors):
        if name not in shapes:
            raise CanonicalError(f"unknown tensor {name!r}")
        got = tuple(tensors[name].shape)
        if got != shapes[name]:
            raise CanonicalError(f"tensor {name!r}: shape {list(got)}, expected {list(shapes[name])}")
        if is_fp32_only(name) and tensors[name].dtype != torch.float32:
            raise CanonicalError(f"tensor {name!r}: must be float32, is {tensors[name].dtype}")


def write_model_dir(out_dir, config, tensors, metadata, tokenizer=None, tokenizer_path=None,
                    extra_files=None, on_tensor=None, kept_tensors=None):
    """Validate and write a canonical directory atomically.

    `tensors` maps names to tensors or Lazy tensors (weights/lazy_tensor.py);
    the names, shapes and dtypes are checked before anything is written, and each
    Lazy is made only when written (safetensors_io.write_file, which calls
    on_tensor(name, nbytes) after each one). kept_tensors: {file name: {name:
    tensor or Lazy}} written verbatim beside the model and never loaded by the
    engine (Qwen3.5's multi-token-prediction head).

    Everything goes into a temporary sibling directory that is renamed onto
    `out_dir` only when complete, so a failure never leaves a half-written model.
    `out_dir` must not exist (refusing to overwrite keeps a failed run from
    destroying a good model).
    """
    check_tensors(config, tensors)
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir):
        raise CanonicalError(f"output {out_dir} already exists")
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out_dir) + ".tmp-", dir=parent)
    try:
        os.chmod(tmp, 0o755)   # mkdtemp makes it owner-only; a model dir is meant to be shared
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        meta = {"format": FORMAT, "version": str(VERSION), **metadata}
        safetensors_io.write_file(tensors, os.path.join(tmp, "model.safetensors"), meta,
                                  on_tensor=on_tensor)
        if tokenizer_path is not None:
            shutil.copyfile(tokenizer_path, os.path.join(tmp, "tokenizer.json"))
        elif tokenizer is not None:
            with open(os.path.join(tmp, "tokenizer.json"), "w") as f:
                json.dump(tokenizer, f)
                f.write("\n")
        for fname, text in (extra_files or {}).items():
            with open(os.path.join(tmp, fname), "w") as f:
                f.write(text)
        for fname, kept in (kept_tensors or {}).items():
            safetensors_io.write_file(kept, os.path.join(tmp, fname), meta)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_model_dir(model_dir):
    """Read and validate a canonical directory; return (config, {name: tensor}, metadata)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    tensors, meta = safetensors_io.load_file(os.path.join(model_dir, "model.safetensors"))
    if meta.get("format") != FORMAT:
        raise CanonicalError(f"{model_dir}: safetensors __metadata__ format is {meta.get('format')!r}")
    check_tensors(config, tensors)
    return config, tensors, meta

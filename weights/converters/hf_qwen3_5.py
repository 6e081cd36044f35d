"""Hugging Face Qwen3.5 (`Qwen3_5ForConditionalGeneration`, `Qwen3_5ForCausalLM`,
and the MoE `Qwen3_5MoeForConditionalGeneration`, `Qwen3_5MoeForCausalLM`)
-> canonical `gdn` / gated `attention` + `mlp` or `moe` blocks (MODELS.md 12, 13).

Decoder layer j becomes two blocks:
  2j:   `gdn` (Gated DeltaNet, linear_attn.*) or, where layer_types[j] is
        "full_attention", `attention` with Qwen3.5's per-head q/k RMSNorm
        (`qk_norm`), sigmoid output gate (`out_gate`) and RoPE on the first
        int(head_dim * partial_rotary_factor) channels of each head; its
        pre-norm is input_layernorm.
  2j+1: `mlp` (gated SiLU), post_attention_layernorm as its pre-norm; in the
        MoE models `moe`: softmax over all experts in fp32, the top
        num_experts_per_tok renormalised, SwiGLU experts, and a shared SwiGLU
        expert scaled by sigmoid(shared_expert_gate x) (MODELS.md 13.4); the
        experts per expert or fused as transformers 5 holds them.

Qwen3.5's RMSNorms store w and scale by 1 + w (MODELS.md 13.1); the canonical
rmsnorm scales by its weight, so the converter writes 1 + w, in fp32 whatever
--dtype (a bf16 1 + w would round w away). The GDN gated norm is a plain w and
is copied. A = -exp(A_log) and dt_bias are fp32. q_proj holds per head
[query ; gate] rows (13.2); they become attn.q and attn.gate. mRoPE with text
only is 1-D partial RoPE at the token index (13.3), which is what the
attention block runs; mrope_section is ignored.

`Qwen3_5ForConditionalGeneration` directories (what Qwen/Qwen3.5-* ship) keep
the text fields in text_config and the text weights under
model.language_model.; the vision tower (model.visual.*) is skipped: the
server takes text only. The multi-token-prediction head (mtp.*), which
transformers drops on load, is kept verbatim in mtp.safetensors beside the
model (config "mtp": {"layers": n, "run": false}) for speculative decoding; it
is never run.

Full attention keeps a constant-size cache: `sinks` (S, default 4) first tokens
plus the `window` (W, default 8188) most recent ones; while a stream fits in
S + W + 1 tokens the engine is exact, beyond it StreamingLLM's rule applies
(MODELS.md 3.4). The GDN layers are exact at any length.

Rejected, naming the field or tensor: another architecture, a non-silu
hidden_act, rope types other than "default", layer_types of another length or
with other values, value heads that are not a multiple of the key heads, and any
tensor that is missing, unknown or mis-shaped.
"""

import json

import torch

from weights.converters import hf_layers, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import check_tensors, load_tensors, matrices
from weights.converters.hf_config import (attention_heads, boolean, canonical_config,
                                          check_silu, load_config, positive_number)
from weights.converters.mamba_common import positive_int

NAME = "hf-qwen3_5"
DEFAULT_WINDOW = 8188
SERVING_OPTIONS = sink_cache.OPTIONS

# Qwen3_5TextConfig's defaults (transformers 5.23 configuration_qwen3_5.py).
DEFAULTS = {"vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
            "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4,
            "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
            "tie_word_embeddings": False, "attention_bias": False, "head_dim": 256,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_num_key_heads": 16,
            "linear_num_value_heads": 32, "full_attention_interval": 4}
# model_type -> (architecture, weight prefix, text config nested under
# text_config); hf-qwen3-next (weights/converters/hf_qwen3_next.py) passes its own.
LAYOUTS = {"qwen3_5": ("Qwen3_5ForConditionalGeneration", "model.language_model.", True),
           "qwen3_5_text": ("Qwen3_5ForCausalLM", "model.", False),
           "qwen3_5_moe": ("Qwen3_5MoeForConditionalGeneration", "model.language_model.", True),
           "qwen3_5_moe_text": ("Qwen3_5MoeForCausalLM", "model.", False)}
# Qwen3_5MoeTextConfig's own defaults (intermediate_size is not one of its fields).
MOE_DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 40, "num_key_value_heads": 2,
                "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                "num_experts_per_tok": 8, "num_experts": 256}
# Qwen3NextConfig's (transformers 5.23 configuration_qwen3_next.py).
NEXT_DEFAULTS = {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                 "num_hidden_layers": 48, "num_key_value_heads": 2, "decoder_sparse_step": 1,
                 "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                 "num_experts_per_tok": 10, "num_experts": 512, "norm_topk_prob": True,
                 "mlp_only_layers": None}
NEXT_LAYOUTS = {"qwen3_next": ("Qwen3NextForCausalLM", "model.", False)}
SKIPPED = ("model.visual.",)
MTP = "mtp."


def _layout(cfg, layouts):
    mt = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    if mt not in layouts or (archs and layouts[mt][0] not in archs):
        want = ", ".join(f"{t} / {a}" for t, (a, _, _) in layouts.items())
        raise ConvertError(f"config: unknown architecture (model_type={mt!r}, "
                           f"architectures={archs!r}); expected {want}")
    arch, prefix, nested = layouts[mt]
    text = cfg.get("text_config") if nested else cfg
    if not isinstance(text, dict):
        raise ConvertError("config: field 'text_config' must be an object")
    return prefix, text, arch


def _layer_types(text, n_layers):
    types = text.get("layer_types")
    if types is None:
        every = positive_int({**DEFAULTS, **text}, "full_attention_interval")
        return ["full_attention" if (j + 1) % every == 0 else "linear_attention"
                for j in range(n_layers)]
    if (not isinstance(types, list) or len(types) != n_layers or
            any(t not in ("linear_attention", "full_attention") for t in types)):
        raise ConvertError(f"config: field 'layer_types' must list \"linear_attention\" or "
                           f"\"full_attention\" for each of the {n_layers} layers, got "
                           f"{json.dumps(types)[:80]}")
    return types


def _rope(text, head_dim):
    """(rope_theta, rotary_dim) from rope_parameters, legacy top-level fields
    folded in by setdefault as transformers 5 does (the dict's values win)."""
    rp = text.get("rope_parameters") or {}
    if not isinstance(rp, dict):
        raise ConvertError("config: field 'rope_parameters' must be an object")
    rp = dict(rp)
    for key in ("rope_theta", "partial_rotary_factor"):
        if text.get(key) is not None:
            rp.setdefault(key, text[key])
    rp.setdefault("partial_rotary_factor", 0.25)
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind != "default":
        raise ConvertError(f"config: rope_parameters.rope_type {kind!r} unsupported (only "
                           "\"default\")")
    theta = positive_number(rp, "rope_theta", 10000.0)
    factor = positive_number(rp, "partial_rotary_factor", 0.25)
    d = int(head_dim * factor)
    if d < 2 or d % 2 or d > head_dim:
        raise ConvertError(f"config: rope_parameters.partial_rotary_factor {factor:g} gives "
                           f"rotary dim int({head_dim} x {factor:g}) = {d}; it must be even "
                           f"and within [2, head_dim {head_dim}]")
    return theta, d


def _moe(text, renormalize):
    """The MoE layers' shape (MODELS.md 13.4): softmax over all experts, the top
    k (renormalised always in Qwen3.5-MoE, by norm_topk_prob in Qwen3-Next), a
    shared expert behind a sigmoid."""
    X, k = positive_int(text, "num_experts"), positive_int(text, "num_experts_per_tok")
    if k > X:
        raise ConvertError(f"config: field 'num_experts_per_tok' {k} exceeds num_experts {X}")
    return {"n_experts": X, "top_k": k, "d_ff": positive_int(text, "moe_intermediate_size"),
            "shared_d_ff": positive_int(text, "shared_expert_intermediate_size"),
            "renormalize": renormalize}


def _next_ffn(text, n_layers):
    """Qwen3-Next's feed-forward per layer: MoE iff num_experts > 0, (i + 1) %
    decoder_sparse_step == 0 and i not in mlp_only_layers, else a dense MLP."""
    X = text["num_experts"]
    if isinstance(X, bool) or not isinstance(X, int) or X < 0:
        raise ConvertError(f"config: field 'num_experts' must be a non-negative integer, "
                           f"got {X!r}")
    step = positive_int(text, "decoder_sparse_step")
    dense = text["mlp_only_layers"] or []
    if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
        raise ConvertError(f"config: field 'mlp_only_layers' must be a list of layer indices, "
                           f"got {dense!r}")
    return ["moe" if X > 0 and (i + 1) % step == 0 and i not in dense else "mlp"
            for i in range(n_layers)]


def read_dims(cfg, layouts=None):
    """Canonical dimensions and the per-layer plan from an HF Qwen3.5 (or, with
    NEXT_LAYOUTS, Qwen3-Next) config dict."""
    prefix, text, arch = _layout(cfg, layouts or LAYOUTS)
    check_silu(text, ": the GDN conv, the MLP and the gates use it")
    tied = boolean(text, "tie_word_embeddings",
                   cfg.get("tie_word_embeddings", DEFAULTS["tie_word_embeddings"]))
    nxt, moe = arch == "Qwen3NextForCausalLM", "Moe" in arch
    text = {**DEFAULTS, **(MOE_DEFAULTS if moe else {}), **(NEXT_DEFAULTS if nxt else {}),
            **text}
    D = positive_int(text, "hidden_size")
    L = positive_int(text, "num_hidden_layers")
    Hq, Hkv, dh = attention_heads(text, D, explicit_head_dim=True)
    theta, rotary_dim = _rope(text, dh)
    Hk, Hv = positive_int(text, "linear_num_key_heads"), positive_int(text, "linear_num_value_heads")
    if Hv % Hk:
        raise ConvertError(f"config: field 'linear_num_value_heads' {Hv} must be a multiple "
                           f"of linear_num_key_heads {Hk}")
    ffn = _next_ffn(text, L) if nxt else ["moe" if moe else "mlp"] * L
    return {"prefix": prefix, "vocab_size": positive_int(text, "vocab_size"), "d_model": D,
            "n_layers": L, "layers": _layer_types(text, L), "ffn": ffn,
            "moe": (_moe(text, boolean(text, "norm_topk_prob", True) if nxt else True)
                    if "moe" in ffn else None),
            "d_ff": positive_int(text, "intermediate_size") if "mlp" in ffn else None,
            "gdn_fused": nxt,
            "n_heads": Hq, "n_kv_heads": Hkv, "head_dim": dh, "rotary_dim": rotary_dim,
            "rope_theta": theta, "attn_bias": boolean(text, "attention_bias", False),
            "n_k_heads": Hk, "n_v_heads": Hv,
            "head_k_dim": positive_int(text, "linear_key_head_dim"),
            "head_v_dim": positive_int(text, "linear_value_head_dim"),
            "d_conv": positive_int(text, "linear_conv_kernel_dim"),
            "eps": positive_number(text, "rms_norm_eps", DEFAULTS["rms_norm_eps"]),
            "max_pos": sink_cache.max_positions(text), "tied": tied, "defaults": text}


def _gdn_shapes(s, dims):
    D, Hk, Hv = dims["d_model"], dims["n_k_heads"], dims["n_v_heads"]
    kd, vd = Hk * dims["head_k_dim"], Hv * dims["head_v_dim"]
    conv = 2 * kd + vd
    if dims["gdn_fused"]:        # Qwen3-Next: interleaved per key-head group (12.2)
        shapes = {s + "in_proj_qkvz.weight": (2 * kd + 2 * vd, D),
                  s + "in_proj_ba.weight": (2 * Hv, D)}
    else:
        shapes = {s + "in_proj_qkv.weight": (conv, D), s + "in_proj_z.weight": (vd, D),
                  s + "in_proj_b.weight": (Hv, D), s + "in_proj_a.weight": (Hv, D)}
    shapes.update({s + "conv1d.weight": (conv, 1, dims["d_conv"]), s + "A_log": (Hv,),
                   s + "dt_bias": (Hv,), s + "norm.weight": (dims["head_v_dim"],),
                   s + "out_proj.weight": (D, vd)})
    return shapes


def _attention_shapes(s, dims):
    D, qd = dims["d_model"], dims["n_heads"] * dims["head_dim"]
    kd = dims["n_kv_heads"] * dims["head_dim"]
    shapes = hf_layers.attention_shapes(s, D, 2 * qd, kd, lambda n: dims["attn_bias"])
    shapes[s + "o_proj.weight"] = (D, qd)
    shapes[s + "q_norm.weight"] = shapes[s + "k_norm.weight"] = (dims["head_dim"],)
    return shapes


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint's text model must hold
    (lm_head.weight apart)."""
    P, V, D = dims["prefix"], dims["vocab_size"], dims["d_model"]
    s = {P + "embed_tokens.weight": (V, D), P + "norm.weight": (D,)}
    for j, mixer in enumerate(dims["layers"]):
        p = f"{P}layers.{j}."
        s[p + "input_layernorm.weight"] = s[p + "post_attention_layernorm.weight"] = (D,)
        if mixer == "full_attention":
            s.update(_attention_shapes(p + "self_attn.", dims))
        else:
            s.update(_gdn_shapes(p + "linear_attn.", dims))
        if dims["ffn"][j] == "mlp":
            s.update(hf_layers.mlp_shapes(p + "mlp.", D, dims["d_ff"], False))
        else:
            s.update(_moe_shapes(p + "mlp.", dims))
    return s


def _moe_shapes(s, dims):
    """Per-expert projections, or transformers 5's fused experts.gate_up_proj
    [X, 2F, D] (gate rows first) and experts.down_proj [X, D, F] when the
    checkpoint holds those (dims["fused_experts"])."""
    D, m = dims["d_model"], dims["moe"]
    X, F_ = m["n_experts"], m["d_ff"]
    shapes = {s + "gate.weight": (X, D), s + "shared_expert_gate.weight": (1, D)}
    shapes.update(hf_layers.mlp_shapes(s + "shared_expert.", D, m["shared_d_ff"], False))
    if dims.get("fused_experts"):
        shapes[s + "experts.gate_up_proj"] = (X, 2 * F_, D)
        shapes[s + "experts.down_proj"] = (X, D, F_)
    else:
        for e in range(X):
            shapes.update(hf_layers.mlp_shapes(s + f"experts.{e}.", D, F_, False))
    return shapes


def _one_plus(t):
    """A Qwen3.5 RMSNorm weight as the canonical rmsnorm's: 1 + w, fp32."""
    return (1.0 + t.double()).float().contiguous()


def _deinterleave(mat, s, c, dims):
    """Qwen3-Next's in_proj_qkvz / in_proj_ba, grouped per key head g as
    [q_g; k_g; v_g (r heads); z_g] and [b_g; a_g] (MODELS.md 12.2), as
    Qwen3.5's separate projections; value head g*r + j stays head g*r + j."""
    Hk, dk, dv = dims["n_k_heads"], dims["head_k_dim"], dims["head_v_dim"]
    r = dims["n_v_heads"] // Hk
    qkvz = mat(s + "in_proj_qkvz.weight")
    groups = qkvz.reshape(Hk, 2 * dk + 2 * r * dv, -1)
    q, k, v, z = torch.split(groups, [dk, dk, r * dv, r * dv], dim=1)
    ba = mat(s + "in_proj_ba.weight").reshape(Hk, 2 * r, -1)
    b, a = torch.split(ba, [r, r], dim=1)
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    return {c + "in_qkv.weight": torch.cat([flat(q), flat(k), flat(v)]).contiguous(),
            c + "in_z.weight": flat(z).contiguous(), c + "in_b.weight": flat(b).contiguous(),
            c + "in_a.weight": flat(a).contiguous()}


def _map_gdn(tensors, mat, s, c, dims):
    if dims["gdn_fused"]:
        out = _deinterleave(mat, s, c, dims)
    else:
        out = {c + "in_qkv.weight": mat(s + "in_proj_qkv.weight"),
               c + "in_z.weight": mat(s + "in_proj_z.weight"),
               c + "in_b.weight": mat(s + "in_proj_b.weight"),
               c + "in_a.weight": mat(s + "in_proj_a.weight")}
    out.update({c + "conv.weight": mat(s + "conv1d.weight")[:, 0, :].contiguous(),
           c + "A": (-torch.exp(tensors[s + "A_log"].double())).float(),
           c + "dt_bias": tensors[s + "dt_bias"].float().contiguous(),
           c + "gated_norm.weight": mat(s + "norm.weight"),
           c + "out_proj.weight": mat(s + "out_proj.weight")})
    return out


def _map_attention(tensors, mat, s, c, dims):
    H, dh = dims["n_heads"], dims["head_dim"]
    out = hf_layers.map_attention(mat, s, c, lambda n: dims["attn_bias"])
    # q_proj rows are per head [query (dh) ; gate (dh)] (MODELS.md 13.2).
    for suffix in (("weight", "bias") if dims["attn_bias"] else ("weight",)):
        both = out.pop(c + f"attn.q.{suffix}")
        both = both.reshape(H, 2, dh, *both.shape[1:])
        out[c + f"attn.q.{suffix}"] = both[:, 0].reshape(H * dh, *both.shape[3:]).contiguous()
        out[c + f"attn.gate.{suffix}"] = both[:, 1].reshape(H * dh, *both.shape[3:]).contiguous()
    out[c + "attn.q_norm.weight"] = _one_plus(tensors[s + "q_norm.weight"])
    out[c + "attn.k_norm.weight"] = _one_plus(tensors[s + "k_norm.weight"])
    return out


def split_tensors(tensors, dims):
    """(text model tensors, mtp tensors); the vision tower is dropped."""
    text, mtp = {}, {}
    for name, t in tensors.items():
        if name.startswith(MTP):
            mtp[name] = t
        elif not name.startswith(SKIPPED):
            text[name] = t
    return text, mtp


def map_tensors(tensors, dims, dtype):
    """Text model tensors -> canonical tensors (matrices in `dtype`; norms, A,
    dt_bias fp32)."""
    P = dims["prefix"]
    check_tensors(tensors, source_shapes(dims), P + "embed_tokens.weight", dims["tied"])
    mat = matrices(tensors, dtype)
    out = {"embed.weight": mat(P + "embed_tokens.weight"),
           "final_norm.weight": _one_plus(tensors[P + "norm.weight"])}
    if not dims["tied"]:
        out["lm_head.weight"] = mat("lm_head.weight")
    for j, mixer in enumerate(dims["layers"]):
        s, a, m = f"{P}layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        out[a + "norm.weight"] = _one_plus(tensors[s + "input_layernorm.weight"])
        if mixer == "full_attention":
            out.update(_map_attention(tensors, mat, s + "self_attn.", a, dims))
        else:
            out.update(_map_gdn(tensors, mat, s + "linear_attn.", a, dims))
        out[m + "norm.weight"] = _one_plus(tensors[s + "post_attention_layernorm.weight"])
        if dims["ffn"][j] == "mlp":
            out.update(hf_layers.map_mlp(mat, s + "mlp.", m, False))
        else:
            out.update(_map_moe(tensors, mat, s + "mlp.", m, dims))
    return out


def _map_moe(tensors, mat, s, c, dims):
    X, F_ = dims["moe"]["n_experts"], dims["moe"]["d_ff"]
    out = {c + "moe.router.weight": tensors[s + "gate.weight"].float().contiguous(),
           c + "moe.shared_gate.weight":
               tensors[s + "shared_expert_gate.weight"].float().contiguous()}
    for n in ("gate", "up", "down"):
        out[c + f"moe.shared.{n}.weight"] = mat(s + f"shared_expert.{n}_proj.weight")
    if dims.get("fused_experts"):
        gate_up = mat(s + "experts.gate_up_proj")
        out[c + "moe.gate.weight"] = gate_up[:, :F_].contiguous()
        out[c + "moe.up.weight"] = gate_up[:, F_:].contiguous()
        out[c + "moe.down.weight"] = mat(s + "experts.down_proj")
    else:
        for n in ("gate", "up", "down"):
            out[c + f"moe.{n}.weight"] = torch.stack(
                [mat(s + f"experts.{e}.{n}_proj.weight") for e in range(X)])
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts: mixer then mlp for every decoder layer."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    attn = {"kind": "attention", "norm": norm, "n_heads": dims["n_heads"],
            "n_kv_heads": dims["n_kv_heads"], "head_dim": dims["head_dim"],
            "qkv_bias": dims["attn_bias"], "o_bias": dims["attn_bias"], "pos": "rope_half",
            "rope_theta": dims["rope_theta"], "rope_scaling": None,
            "rotary_dim": dims["rotary_dim"], "sinks": sinks, "window": window,
            "rel_bias": None, "qk_norm": {"type": "rmsnorm", "eps": dims["eps"]},
            "out_gate": "sigmoid"}
    gdn = {"kind": "gdn", "norm": norm, "n_k_heads": dims["n_k_heads"],
           "n_v_heads": dims["n_v_heads"], "head_k_dim": dims["head_k_dim"],
           "head_v_dim": dims["head_v_dim"], "d_conv": dims["d_conv"],
           "gated_norm_eps": dims["eps"]}
    ffn = {"mlp": {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": "silu",
                   "gated": True, "bias": False}}
    if dims["moe"] is not None:
        m = dims["moe"]
        ffn["moe"] = {"kind": "moe", "norm": norm, "routing": "top1_softmax",
                      "n_experts": m["n_experts"], "d_ff": m["d_ff"], "act": "silu",
                      "gated": True, "router_bias": False, "expert_bias": False,
                      "capacity": None, "top_k": m["top_k"], "renormalize": m["renormalize"],
                      "shared": {"d_ff": m["shared_d_ff"], "gate": "sigmoid"}}
    out = []
    for mixer, f in zip(dims["layers"], dims["ffn"]):
        out += [json.loads(json.dumps(attn if mixer == "full_attention" else gdn)),
                json.loads(json.dumps(ffn[f]))]
    return out


def convert(src, dtype, sinks=None, window=None, layouts=None):
    """Return (canonical config, canonical tensors) for an HF Qwen3.5 directory
    (layouts: NEXT_LAYOUTS for Qwen3-Next); tensors named mtp.* are the kept
    multi-token-prediction head."""
    cfg = load_config(src)
    dims = read_dims(cfg, layouts)
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window,
                                 bound_explicit_window=True)
    text, mtp = split_tensors(load_tensors(src), dims)
    dims["fused_experts"] = any(n.endswith("mlp.experts.gate_up_proj") for n in text)
    tensors = map_tensors(text, dims, dtype)
    config = canonical_config(dims["defaults"], src, dims, dims["tied"], blocks(dims, S, W))
    if mtp:
        layers = {int(n.split(".")[2]) for n in mtp if n.startswith(MTP + "layers.")}
        config["mtp"] = {"layers": len(layers), "run": False, "file": "mtp.safetensors"}
        tensors.update({n: t.to(dtype).contiguous() for n, t in mtp.items()})
    return config, tensors

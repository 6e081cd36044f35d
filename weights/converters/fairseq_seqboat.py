"""fairseq SeqBoat LM checkpoint (`renll/SeqBoat`, model `slag_lm`) -> canonical `seqboat` blocks.

SRC is the checkpoint file (e.g. checkpoint_best.pt) or a directory holding
checkpoint_best.pt / checkpoint_last.pt / model.pt. The file is a pickled dict:
weights under "model", hyper-parameters under "args" (argparse Namespace or
dict) or, in newer fairseq, "cfg"["model"] (MODELS.md 2.6). Hydra-era fairseq
pickles "cfg" as an omegaconf DictConfig (its "model" a DictConfig or a
Namespace); reading those needs the omegaconf package (Debian
python3-omegaconf), and the config is taken as
OmegaConf.to_container(cfg, resolve=True).

The pickle is read with an unpickler that only admits tensors, plain
containers, argparse.Namespace, numpy arrays/scalars and omegaconf's own
config containers and nodes; anything else in the file (a class it would have
to import) is an error naming it. Its tensors stay on disk until the writer
asks for them (weights/converters/torch_zip.py), the optimizer state's never.

Preprocessing (MODELS.md 2.8), in the source's own fp32 arithmetic:
  ema.in_coef = sigmoid(delta) * beta, ema.decay = 1 - sigmoid(delta) * sigmoid(alpha),
  ema.out_coef = gamma * sqrt(1 / N_e), ema.skip = omega (trailing axis squeezed);
  hx_proj rows 0..1 -> router, rows 2.. -> hx; router.temperature = exp(q_router.temp);
  mx_proj -> gau.in_proj (rows Z, R, V); gamma/beta -> gau.qk_gamma/qk_beta;
  h_proj -> gau.out_proj; rel_pos_bias.rel_pos_bias -> gau.rel_pos_bias (simple).
Model level: embed scale sqrt(D) unless no_scale_embedding; padding_idx 1 (the
fairseq dictionary's pad); final norm only with normalize_before, without
tensors when no_affine_final_norm; output projection tied with
share_decoder_input_output_embed. EOS is the dictionary's 2.

Tokenizer: fairseq's dict.txt beside the checkpoint becomes a tokenizer.json
that gives every symbol the id fairseq gave it (fairseq_dictionary.py): words
split on whitespace, a newline read as </s>, each prompt starting with </s>
(<s> with add_bos_token), and no text ever producing the padding id. The
config's bos_token_id records that first id.

truncation_length: fairseq computes each EMA as a convolution whose kernel
keeps only the first truncation_length taps (2048 by default). The engine runs
the recurrence, i.e. the untruncated kernel (MODELS.md 2.1): identical while a
stream is at most truncation_length tokens long, and from then on each EMA
also sees the inputs further back, with the weight the kernel's tail gives
them. The converter measures that weight and warns (ConvertWarning) when some
channel's tail holds at least TRUNCATION_TAIL_WARN of its kernel.

Only the configuration the engine runs converts: local working memory
(decoder_chunk_size > 0 = window w), softmax or relu2 attention, rotary
(interleaved RoPE, theta 10000) or simple relative bias (not local_pos), silu,
layernorm, scalenorm or rmsnorm, no FFN (decoder_ffn_embed_dim <= 0), no adaptive
input/softmax, no input projection or embedding norm. Anything else is an error.
"""

import _compat_pickle
import argparse
import importlib
import math
import os
import pickle
import zipfile

import torch

import warnings

from weights import canonical
from weights.converters import fairseq_dictionary, torch_zip
from weights.converters.convert_error import ConvertError, ConvertWarning
from weights.converters.hf_checkpoint import fp32, matrices
from weights.lazy_tensor import Lazy, lazy_dict, materialize

NAME = "fairseq-seqboat"
FAIRSEQ_PAD, FAIRSEQ_EOS = 1, 2
NORM_EPS = 1e-5            # SequenceNorm's eps for every norm type (MODELS.md 2.2)
# Fraction of a channel's EMA kernel weight beyond truncation_length taps from
# which the difference between training and serving is worth a warning.
TRUNCATION_TAIL_WARN = 1e-3
CHECKPOINT_NAMES = ("checkpoint_best.pt", "checkpoint_last.pt", "model.pt")

# Defaults of base_lm_architecture (fairseq/models/seqboat_lm.py) for fields a
# checkpoint's args may lack.
ARG_DEFAULTS = {
    "decoder_layers": 6, "decoder_embed_dim": 512, "decoder_hidden_dim": 1664,
    "decoder_z_dim": 128, "decoder_n_dim": 16, "decoder_chunk_size": -1,
    "adaptive_softmax_cutoff": None, "adaptive_input": False, "rel_pos_bias": "simple",
    "normalization_type": "layernorm", "normalize_before": False, "normalize_embedding": False,
    "no_scale_embedding": False, "no_affine_final_norm": False,
    "share_decoder_input_output_embed": False, "activation_fn": "silu",
    "attention_activation_fn": "softmax", "truncation_length": 2048, "local_pos": False,
    "max_target_positions": 1024, "add_bos_token": False,
}
# Task-level fields a Hydra-era checkpoint keeps under cfg.task, not cfg.model.
TASK_FIELDS = ("add_bos_token", "tokens_per_sample")

# Tensors, their storages and OrderedDict are torch_zip's to resolve.
_ALLOWED_GLOBALS = {
    ("argparse", "Namespace"), ("torch", "Size"), ("torch", "device"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
    ("builtins", "dict"), ("builtins", "list"), ("builtins", "int"),
    ("collections", "defaultdict"), ("typing", "Any"),
}
# What a pickled DictConfig holds: containers, their metadata and value nodes.
# Structured configs (fairseq dataclasses as object types) are not admitted:
# they would need fairseq itself; fairseq saves plain (untyped) DictConfigs.
_OMEGACONF_GLOBALS = {
    ("omegaconf.dictconfig", "DictConfig"), ("omegaconf.listconfig", "ListConfig"),
    ("omegaconf.base", "ContainerMetadata"), ("omegaconf.base", "Metadata"),
    ("omegaconf.nodes", "AnyNode"), ("omegaconf.nodes", "StringNode"),
    ("omegaconf.nodes", "IntegerNode"), ("omegaconf.nodes", "FloatNode"),
    ("omegaconf.nodes", "BooleanNode"),
}
OMEGACONF_MISSING = ("the checkpoint's cfg is an omegaconf DictConfig (Hydra-era fairseq); "
                     "install omegaconf to convert it (Debian: python3-omegaconf, "
                     "or bash deploy/setup.sh)")


def _python3_name(module, name):
    """Protocol-2 pickles (torch.save's default) name builtins the Python 2
    way (__builtin__.long); map them as pickle itself would before checking."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _omegaconf():
    """The omegaconf module, or a ConvertError saying how to get it."""
    try:
        return importlib.import_module("omegaconf")
    except ImportError:
        raise ConvertError(OMEGACONF_MISSING) from None


def _admit(module, name):
    """The global a fairseq checkpoint's pickle names beside its tensors (which
    torch_zip resolves itself), if it is one of those above; else an error."""
    module, name = _python3_name(module, name)
    if (module, name) in _OMEGACONF_GLOBALS:
        _omegaconf()
    elif not ((module, name) in _ALLOWED_GLOBALS
              or (module == "torch" and name in ("float32", "float16", "bfloat16", "float64",
                                                 "int64", "int32", "uint8", "bool"))
              or (module.startswith("numpy") and name.endswith("DType"))):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the checkpoint")
    return getattr(importlib.import_module(module), name)


def checkpoint_path(src):
    if os.path.isfile(src):
        return src
    if os.path.isdir(src):
        for n in CHECKPOINT_NAMES:
            if os.path.isfile(os.path.join(src, n)):
                return os.path.join(src, n)
        raise ConvertError(f"{src}: none of {list(CHECKPOINT_NAMES)} found")
    raise ConvertError(f"{src}: no such checkpoint file or directory")


def restricted_torch_load(path):
    """The checkpoint's pickle through torch_zip, its tensors left on disk as Lazy.

    torch.load cannot restrict it: torch 1.13 replaces any pickle_module by
    `pickle` unless weights_only is set, and weights_only refuses the
    argparse.Namespace every fairseq checkpoint holds. torch_zip admits the
    globals _admit does, and reads no tensor (the optimizer state's included)
    until it is made.
    """
    if not zipfile.is_zipfile(path):
        raise ConvertError(f"{path}: not a zip-format torch.save file (the legacy format "
                           "is unsupported)")
    return torch_zip.load(path, _admit)


def load_checkpoint(path):
    try:
        ckpt = restricted_torch_load(path)
    except ConvertError:
        raise
    except Exception as e:                  # pickle/zip errors come in many types
        raise ConvertError(f"{path}: cannot be read as a fairseq checkpoint: {e}") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        raise ConvertError(f"{path}: not a fairseq checkpoint (no 'model' state dict)")
    args = ckpt.get("args")
    task = {}
    if args is None:
        cfg = plain_config(ckpt.get("cfg"))
        if isinstance(cfg, dict):
            args = plain_config(cfg.get("model"))
            task = plain_config(cfg.get("task"))
    if isinstance(args, argparse.Namespace):
        args = vars(args)
    if not isinstance(args, dict):
        raise ConvertError(f"{path}: no hyper-parameters ('args' or 'cfg.model')")
    if isinstance(task, argparse.Namespace):
        task = vars(task)
    args = dict(args)
    if isinstance(task, dict):
        for key in TASK_FIELDS:
            if key in task and key not in args:
                args[key] = task[key]
    sd = ckpt["model"]
    for k, v in sd.items():
        if not isinstance(v, Lazy):
            raise ConvertError(f"{path}: model entry {k!r} is not a tensor")
    return dict(sd), args


def plain_config(value):
    """A DictConfig / ListConfig as plain containers (interpolations resolved);
    anything else as it is. A Namespace stored in a DictConfig, as fairseq
    does for models registered by argparse architecture, comes back as itself."""
    if not type(value).__module__.startswith("omegaconf."):
        return value
    omegaconf = _omegaconf()
    try:
        return omegaconf.OmegaConf.to_container(value, resolve=True)
    except omegaconf.errors.OmegaConfBaseException as e:
        raise ConvertError(f"cfg: cannot be resolved: {e}") from None


def read_dims(args):
    # base_lm_architecture fills absent fields with getattr(args, key, default):
    # an explicit None stays None.
    a = dict(ARG_DEFAULTS)
    a.update(args)
    if a.get("max_target_positions") is None:       # build_model's fallback
        a["max_target_positions"] = 1024
    # Hydra-era configs of dataclass-registered models name the model in _name.
    arch = args.get("arch") or args.get("_name") or "slag_lm"
    if not str(arch).startswith("slag_lm"):
        raise ConvertError(f"args: unknown architecture arch={arch!r}; expected slag_lm*")

    def pos_int(key):
        v = a.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConvertError(f"args: field {key!r} must be a positive integer, got {v!r}")
        return v

    D = pos_int("decoder_embed_dim")
    if a.get("decoder_input_dim", D) not in (None, D):
        raise ConvertError(f"args: decoder_input_dim {a['decoder_input_dim']} != "
                           f"decoder_embed_dim {D} (input projection) is unsupported")
    if a.get("adaptive_input") or a.get("adaptive_softmax_cutoff") is not None:
        raise ConvertError("args: adaptive input / adaptive softmax is unsupported")
    if a.get("normalize_embedding"):
        raise ConvertError("args: normalize_embedding is unsupported")
    ffn = a.get("decoder_ffn_embed_dim", a.get("decoder_hidden_dim"))
    if ffn is not None and ffn > 0:
        raise ConvertError(f"args: decoder_ffn_embed_dim {ffn} > 0 (an FFN per layer) is "
                           "unsupported; SeqBoat LMs use -1")
    if a["activation_fn"] != "silu":
        raise ConvertError(f"args: activation_fn {a['activation_fn']!r} unsupported (only silu)")
    attn_fn = a["attention_activation_fn"]
    if attn_fn not in ("softmax", "relu2"):
        raise ConvertError(f"args: attention_activation_fn {attn_fn!r} unsupported "
                           "(softmax or relu2)")
    w = a["decoder_chunk_size"]
    if isinstance(w, bool) or not isinstance(w, int) or w <= 0:
        raise ConvertError(f"args: decoder_chunk_size {w!r}: only local working memory "
                           "(chunk size > 0 = window) is supported")
    rel = a["rel_pos_bias"]
    if rel == "rotary":
        pos = "rope_interleaved"
    elif rel == "simple":
        if a.get("local_pos"):
            raise ConvertError("args: local_pos (compressed-position bias) is unsupported")
        pos = "simple_bias"
    else:
        raise ConvertError(f"args: rel_pos_bias {rel!r} unsupported (rotary or simple)")
    norm_type = a["normalization_type"]
    if norm_type not in ("layernorm", "scalenorm", "rmsnorm"):
        raise ConvertError(f"args: normalization_type {norm_type!r} unsupported "
                           "(layernorm, scalenorm or rmsnorm)")
    z = pos_int("decoder_z_dim")
    if pos == "rope_interleaved" and z % 2:
        raise ConvertError(f"args: decoder_z_dim {z} must be even for rotary")
    trunc = a.get("truncation_length")
    context = a.get("tokens_per_sample")
    if isinstance(context, bool) or not isinstance(context, int) or context <= 0:
        context = None
    return {"d_model": D, "n_layers": pos_int("decoder_layers"), "z": z,
            "v": pos_int("decoder_hidden_dim"), "ne": pos_int("decoder_n_dim"), "window": w,
            "attn_fn": attn_fn, "pos": pos, "norm_type": norm_type,
            "prenorm": bool(a["normalize_before"]),
            "embed_scale": 1.0 if a["no_scale_embedding"] else math.sqrt(D),
            "final_affine": not a["no_affine_final_norm"],
            "tied": bool(a["share_decoder_input_output_embed"]),
            "max_pos": pos_int("max_target_positions"),
            "truncation": trunc if isinstance(trunc, int) and trunc > 0 else None,
            "context": context,
            "bos": fairseq_dictionary.BOS if a["add_bos_token"] else FAIRSEQ_EOS}


def _norm_shapes(prefix, norm_type, D):
    """SequenceNorm's tensors: ScaleNorm.scalar, RMSNorm.weight, LayerNorm.weight/bias."""
    if norm_type == "scalenorm":
        return {prefix + "scalar": (1,)}
    if norm_type == "rmsnorm":
        return {prefix + "weight": (D,)}
    return {prefix + "weight": (D,), prefix + "bias": (D,)}


def source_shapes(dims, V, M):
    D, z, v, ne = dims["d_model"], dims["z"], dims["v"], dims["ne"]
    s = {"decoder.embed_tokens.weight": (V, D)}
    if dims["prenorm"] and dims["final_affine"]:
        s.update(_norm_shapes("decoder.final_norm.norm.", dims["norm_type"], D))
    for i in range(dims["n_layers"]):
        p = f"decoder.layers.{i}.slag_layer."
        s.update(_norm_shapes(p + "norm.norm.", dims["norm_type"], D))
        for n in ("delta", "alpha", "beta"):
            s[p + f"move.{n}"] = (D, ne, 1)
        s[p + "move.gamma"] = (D, ne)
        s[p + "move.omega"] = (D,)
        s[p + "gamma"] = (2, z)
        s[p + "beta"] = (2, z)
        s[p + "q_router.temp"] = (1,)
        s[p + "mx_proj.weight"] = (z + 2 * v, D)
        s[p + "mx_proj.bias"] = (z + 2 * v,)
        s[p + "hx_proj.weight"] = (2 + D, D)
        s[p + "hx_proj.bias"] = (2 + D,)
        s[p + "h_proj.weight"] = (D, v)
        s[p + "h_proj.bias"] = (D,)
        if dims["pos"] == "simple_bias":
            s[p + "rel_pos_bias.rel_pos_bias"] = (2 * M - 1,)
    return s


def check_source(sd, dims):
    if "decoder.embed_tokens.weight" not in sd:
        raise ConvertError("missing tensor 'decoder.embed_tokens.weight'")
    V = sd["decoder.embed_tokens.weight"].shape[0]
    M = dims["max_pos"]
    want = source_shapes(dims, V, M)
    for name in sorted(want):
        if name not in sd:
            raise ConvertError(f"missing tensor {name!r}")
        got = tuple(sd[name].shape)
        if got != want[name]:
            raise ConvertError(f"tensor {name!r}: shape {list(got)}, expected {list(want[name])}")
    head = "decoder.output_projection.weight"
    for name in sorted(sd):
        if name in want or name in (head, "decoder.version"):
            continue
        raise ConvertError(f"unknown tensor {name!r}")
    if head in sd and tuple(sd[head].shape) != (V, dims["d_model"]):
        raise ConvertError(f"tensor {head!r}: shape {list(sd[head].shape)}, "
                           f"expected {[V, dims['d_model']]}")
    if not dims["tied"] and head not in sd:
        raise ConvertError(f"missing tensor {head!r} (embeddings are not shared)")
    if dims["tied"] and head in sd and not torch.equal(
            materialize(sd[head]).float(), materialize(sd["decoder.embed_tokens.weight"]).float()):
        raise ConvertError(f"tensor {head!r} differs from the embedding although "
                           "share_decoder_input_output_embed is set")
    for name in want:
        if not sd[name].dtype.is_floating_point:
            raise ConvertError(f"tensor {name!r}: dtype {sd[name].dtype} is not floating point")
    return V, M


def _ema_coefficients(delta, alpha, beta):
    """(in_coef, decay) of MultiHeadEMA._calc_coeffs / _compute_kernel, in fp32
    as the source computes them."""
    p = torch.sigmoid(delta)
    q = 1.0 - p * torch.sigmoid(alpha)
    return (p * beta).squeeze(-1), q.squeeze(-1)


def map_tensors(sd, dims, dtype):
    """The canonical tensors (Lazy, made when written) of state dict `sd`, with V and M."""
    sd = lazy_dict(sd)
    V, M = check_source(sd, dims)
    mat, f32 = matrices(sd, dtype), fp32(sd)

    out = {"embed.weight": mat("decoder.embed_tokens.weight")}
    if dims["prenorm"] and dims["final_affine"]:
        for k in _norm_shapes("", dims["norm_type"], 1):
            out["final_norm." + k] = mat("decoder.final_norm.norm." + k)
    if not dims["tied"]:
        out["lm_head.weight"] = mat("decoder.output_projection.weight")
    scale = math.sqrt(1.0 / dims["ne"])     # MultiHeadEMA.scale
    for i in range(dims["n_layers"]):
        s, c = f"decoder.layers.{i}.slag_layer.", f"blocks.{i}."
        for k in _norm_shapes("", dims["norm_type"], 1):
            out[c + "norm." + k] = mat(s + "norm.norm." + k)
        ema = [f32(s + f"move.{n}") for n in ("delta", "alpha", "beta")]
        out[c + "ema.in_coef"] = Lazy.combine(lambda *t: _ema_coefficients(*t)[0], *ema)
        out[c + "ema.decay"] = Lazy.combine(lambda *t: _ema_coefficients(*t)[1], *ema)
        out[c + "ema.out_coef"] = f32(s + "move.gamma").map(lambda g: g * scale)
        out[c + "ema.skip"] = f32(s + "move.omega")
        hx_w, hx_b = mat(s + "hx_proj.weight"), mat(s + "hx_proj.bias")
        out[c + "router.weight"] = hx_w.map(lambda w: w[:2])
        out[c + "router.bias"] = hx_b.map(lambda b: b[:2])
        out[c + "hx.weight"] = hx_w.map(lambda w: w[2:])
        out[c + "hx.bias"] = hx_b.map(lambda b: b[2:])
        out[c + "router.temperature"] = f32(s + "q_router.temp").map(torch.exp)
        out[c + "gau.in_proj.weight"] = mat(s + "mx_proj.weight")
        out[c + "gau.in_proj.bias"] = mat(s + "mx_proj.bias")
        out[c + "gau.qk_gamma"] = mat(s + "gamma")
        out[c + "gau.qk_beta"] = mat(s + "beta")
        out[c + "gau.out_proj.weight"] = mat(s + "h_proj.weight")
        out[c + "gau.out_proj.bias"] = mat(s + "h_proj.bias")
        if dims["pos"] == "simple_bias":
            out[c + "gau.rel_pos_bias"] = mat(s + "rel_pos_bias.rel_pos_bias")
    return out, V, M


def canonical_config(dims, name, V, M):
    norm = {"type": dims["norm_type"], "eps": NORM_EPS, "affine": True}
    block = {"kind": "seqboat", "norm": norm, "prenorm": dims["prenorm"],
             "ema_dim": dims["ne"], "z_dim": dims["z"], "v_dim": dims["v"],
             "window": dims["window"], "attn_fn": dims["attn_fn"], "pos": dims["pos"],
             "rope_theta": 10000.0,
             "rel_pos_max": M if dims["pos"] == "simple_bias" else None,
             "ema_truncation": dims["truncation"]}
    final = ({"type": dims["norm_type"], "eps": NORM_EPS, "affine": dims["final_affine"]}
             if dims["prenorm"] else None)
    return canonical.model_config(
        name=name, vocab_size=V, d_model=dims["d_model"], embed_scale=dims["embed_scale"],
        padding_idx=FAIRSEQ_PAD if V > 1 else None, tie_embeddings=dims["tied"],
        final_norm=final, eos_token_id=FAIRSEQ_EOS if V > FAIRSEQ_EOS else None,
        bos_token_id=dims["bos"] if V > dims["bos"] else None,
        blocks=[dict(block, norm=dict(norm)) for _ in range(dims["n_layers"])])


def convert(src, dtype):
    """Return (canonical config, canonical tensors) for a fairseq SeqBoat checkpoint."""
    path = checkpoint_path(src)
    sd, args = load_checkpoint(path)
    dims = read_dims(args)
    tensors, V, M = map_tensors(sd, dims, dtype)
    warn_truncation(tensors, dims)
    name = os.path.splitext(os.path.basename(os.path.normpath(src)))[0]
    return canonical_config(dims, name, V, M), tensors


def truncation_tail(tensors, n_layers, T):
    """(fraction, block, channel): the largest share of a channel's EMA kernel
    weight that lies at taps >= T, over every block and channel.

    The kernel of channel d is k_l = sum_n eta g phi^l (MODELS.md 2.1); each
    mode's weight |eta g| phi^l sums to |eta g| / (1 - phi), of which
    |eta g| phi^T / (1 - phi) lies at l >= T. The share is taken over the
    modes' weights, so cancellation between modes does not hide a tail.
    """
    best = (0.0, 0, 0)
    for i in range(n_layers):
        p = f"blocks.{i}.ema."
        phi = tensors[p + "decay"].double()
        w = (tensors[p + "out_coef"].double() * tensors[p + "in_coef"].double()).abs()
        w = w / (1.0 - phi).clamp_min(1e-300)
        total = w.sum(1)
        share = (w * phi.clamp_min(0.0) ** T).sum(1) / total.clamp_min(1e-300)
        d = int(share.argmax())
        if float(share[d]) > best[0]:
            best = (float(share[d]), i, d)
    return best


def warn_truncation(tensors, dims):
    T = dims["truncation"]
    if T is None:
        return
    ema = {k: materialize(v) for k, v in tensors.items() if ".ema." in k}   # D x N_e each
    share, block, channel = truncation_tail(ema, dims["n_layers"], T)
    if share < TRUNCATION_TAIL_WARN:
        return
    trained = f" (trained on {dims['context']}-token samples)" if dims["context"] else ""
    warnings.warn(
        f"truncation_length {T}: the checkpoint{trained} was trained with EMA kernels cut "
        f"to {T} taps, and the engine runs them uncut. Streams up to {T} tokens get exactly "
        f"the trained model; after that each EMA also weighs inputs more than {T} tokens "
        f"back, which training never did: up to {100 * share:.2g}% of a channel's kernel "
        f"weight (block {block}, channel {channel}).", ConvertWarning, stacklevel=2)


def default_tokenizer(src, config):
    """The tokenizer.json dict of the dict.txt beside the checkpoint, or None
    when there is none. The dictionary must fit the embedding: a symbol
    without a row is an error; rows without a symbol are never produced."""
    path = os.path.join(os.path.dirname(os.path.abspath(checkpoint_path(src))),
                        fairseq_dictionary.FILE_NAME)
    if not os.path.isfile(path):
        return None
    symbols = fairseq_dictionary.read_symbols(path)
    V = config["vocab_size"]
    if len(symbols) > V:
        raise ConvertError(f"{path}: {len(symbols)} symbols (4 specials and "
                           f"{len(symbols) - 4} lines), but decoder.embed_tokens.weight has "
                           f"{V} rows")
    return fairseq_dictionary.tokenizer_json(symbols, bos=config["bos_token_id"])


"""Random canonical models whose stack mixes block kinds (mamba1, mamba2, gdn, mlp, moe, s4d).

    write_random_model(out_dir, config, seed)

mamba1 blocks get weights from make_random_model's initialiser (one block at a
time); mamba2, gdn, mlp, moe and s4d blocks get their own below. Scales keep
activations in a realistic range: Linear weights uniform(+-1/sqrt(fan_in)),
norms and biases perturbed away from their usual constants so a parity test
notices if any is ignored; s4d follows S4D-Lin (A = -1/2 + i pi n, dt
log-uniform in [1e-3, 1e-1], ZOH, B folded into C) computed in float64 and
stored fp32; mamba2 follows mamba_ssm's Mamba2 initialisation; gdn draws its
decay rate A = -exp(A_log) so that exp(g) stays in about (0.5, 1).
"""

import math

import torch

from weights import canonical
from weights.reference.make_random_model import random_mamba_tensors


def _gen(seed):
    g = torch.Generator().manual_seed(seed)

    def uniform(shape, bound):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    def normal(shape, std):
        return torch.randn(shape, generator=g, dtype=torch.float64) * std

    return g, uniform, normal


def _norm_tensors(p, norm, D, normal):
    t = {}
    for name, shape in canonical.norm_shapes(p + "norm.", norm, D).items():
        base = 1.0 if name.endswith(("weight", "scalar")) else 0.0
        t[name] = base + normal(shape, 0.1)
    return t


def mlp_tensors(p, b, D, seed):
    _, uniform, normal = _gen(seed)
    F_ = b["d_ff"]
    t = _norm_tensors(p, b.get("norm"), D, normal)
    for name, shape in canonical.mlp_shapes(p, b, D).items():
        fan_in = D if ".up." in name or ".gate." in name else F_
        t[name] = uniform(shape, 1 / math.sqrt(fan_in))
    return t


def moe_tensors(p, b, D, seed):
    _, uniform, normal = _gen(seed)
    t = _norm_tensors(p, b.get("norm"), D, normal)
    for name, shape in canonical.moe_shapes(p, b, D).items():
        if ".router" in name or "shared_gate" in name:
            # Spread router logits so that routing is decisive (no near ties
            # between fp32 and float64) and several experts get used.
            t[name] = normal(shape, 1.5 / math.sqrt(shape[-1] if len(shape) > 1 else 1))
        else:
            fan_in = shape[-1] if ".down." in name else D
            t[name] = uniform(shape, 1 / math.sqrt(fan_in))
    return t


def s4d_tensors(p, b, D, seed):
    g, uniform, normal = _gen(seed)
    H, M, ch = D, b["modes"], b["channels"]
    t = _norm_tensors(p, b.get("norm"), D, normal)
    log_dt = (torch.rand(H, generator=g, dtype=torch.float64)
              * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
    dt = torch.exp(log_dt)[:, None]
    A = torch.complex(-0.5 * torch.ones(H, M, dtype=torch.float64),
                      math.pi * torch.arange(M, dtype=torch.float64).repeat(H, 1))
    C = torch.complex(normal((ch, H, M), 0.5 ** 0.5), normal((ch, H, M), 0.5 ** 0.5))
    dA = torch.exp(dt * A)
    Cbar = C * (dA - 1) / A
    t[p + "s4d.dA"] = torch.view_as_real(dA).contiguous()
    t[p + "s4d.C"] = torch.view_as_real(Cbar).contiguous()
    t[p + "s4d.D"] = normal((ch, H), 1.0)
    if b["output"] == "gelu_glu":
        t[p + "s4d.out.weight"] = uniform((2 * H, ch * H), 1 / math.sqrt(ch * H))
        t[p + "s4d.out.bias"] = uniform((2 * H,), 1 / math.sqrt(ch * H))
    return t


def mamba2_tensors(p, b, D, seed):
    """mamba_ssm's Mamba2 initialisation: Δ log-uniform in [1e-3, 1e-1] through the
    inverse softplus into dt_bias, A = -uniform(1, 16), D and the gated norm's
    weight near 1; the projections and conv uniform(+-1/sqrt(fan_in))."""
    g, uniform, normal = _gen(seed)
    H, P = b["n_heads"], b["head_dim"]
    E = H * P
    t = _norm_tensors(p, b.get("norm"), D, normal)
    for name, shape in canonical.mamba2_shapes(p, b, D).items():
        leaf = name[len(p):]
        if leaf == "dt_bias":
            dt = torch.exp(torch.rand(shape, generator=g, dtype=torch.float64)
                           * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
            t[name] = dt + torch.log(-torch.expm1(-dt))
        elif leaf == "A":
            t[name] = -(1 + 15 * torch.rand(shape, generator=g, dtype=torch.float64))
        elif leaf in ("D", "gated_norm.weight"):
            t[name] = 1.0 + normal(shape, 0.2)
        elif leaf.startswith("conv."):
            t[name] = uniform(shape, 1 / math.sqrt(b["d_conv"]))
        elif leaf.startswith("out_proj."):
            t[name] = uniform(shape, 1 / math.sqrt(E))
        else:
            t[name] = uniform(shape, 1 / math.sqrt(D))
    return t


def gdn_tensors(p, b, D, seed):
    """A = -exp(A_log) with A_log uniform in [-3, -0.5] and dt_bias uniform(+-0.5), so a
    token's decay exp(g) stays in about (0.5, 1); the gated norm's weight near 1; the
    projections and conv uniform(+-1/sqrt(fan_in))."""
    g, uniform, normal = _gen(seed)
    Hv, dv = b["n_v_heads"], b["head_v_dim"]
    t = _norm_tensors(p, b.get("norm"), D, normal)
    for name, shape in canonical.gdn_shapes(p, b, D).items():
        leaf = name[len(p):]
        if leaf == "A":
            t[name] = -torch.exp(torch.rand(shape, generator=g, dtype=torch.float64) * 2.5 - 3.0)
        elif leaf == "dt_bias":
            t[name] = uniform(shape, 0.5)
        elif leaf == "gated_norm.weight":
            t[name] = 1.0 + normal(shape, 0.2)
        elif leaf == "conv.weight":
            t[name] = uniform(shape, 1 / math.sqrt(b["d_conv"]))
        elif leaf == "out_proj.weight":
            t[name] = uniform(shape, 1 / math.sqrt(Hv * dv))
        else:
            t[name] = uniform(shape, 1 / math.sqrt(D))
    return t


RANDOM_BLOCK = {"mlp": mlp_tensors, "moe": moe_tensors, "s4d": s4d_tensors,
                "mamba2": mamba2_tensors, "gdn": gdn_tensors}


def random_tensors(config, seed=0, dtype=torch.float32):
    """Canonical tensors for a mixed-kind config, deterministic for a seed."""
    D = config["d_model"]
    # Globals (embedding, final norm, head) from the Mamba maker with no blocks.
    t = random_mamba_tensors(dict(config, blocks=[]), seed, torch.float64)
    for i, b in enumerate(config["blocks"]):
        p = f"blocks.{i}."
        if b["kind"] == "mamba1":
            one = random_mamba_tensors(dict(config, blocks=[b]), seed + 1000 + i, torch.float64)
            t.update({p + k[len("blocks.0."):]: v for k, v in one.items()
                      if k.startswith("blocks.0.")})
        else:
            t.update(RANDOM_BLOCK[b["kind"]](p, b, D, seed + 1000 + i))
    return {k: v.to(canonical.stored_dtype(k, dtype)) for k, v in t.items()}


def hybrid_config(blocks, *, name="random-hybrid", vocab_size=canonical.BYTE_VOCAB, d_model=32,
                  tie_embeddings=True, eps=1e-5):
    """A canonical config.json dict around a list of block dicts."""
    return {"format": canonical.FORMAT, "version": canonical.VERSION, "name": name,
            "vocab_size": vocab_size, "d_model": d_model,
            "embed": {"scale": 1.0, "padding_idx": None}, "tie_embeddings": tie_embeddings,
            "logit_scale": 1.0, "final_norm": {"type": "rmsnorm", "eps": eps, "affine": True},
            "residual_dtype": "float32", "eos_token_id": canonical.BYTE_EOS,
            "bos_token_id": None, "blocks": blocks}


def write_random_model(out_dir, config, seed=0, dtype="f32"):
    tensors = random_tensors(config, seed, canonical.DTYPES[dtype])
    canonical.write_model_dir(out_dir, config, tensors,
                              {"source": f"random seed={seed}",
                               "converter": "random_blocks@1"},
                              tokenizer=canonical.byte_tokenizer())
    return config

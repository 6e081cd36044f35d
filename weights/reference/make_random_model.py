"""Create a random canonical Mamba-1 model directory (deterministic for a seed).

Scales follow Mamba's own initialisation so activations stay in a realistic range:
A_log = log(1..N), dt bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1],
Linear weights uniform(+-1/sqrt(fan_in)). Norm weights, D and the conv bias are
perturbed away from their usual constants so a parity test notices if any of them
is ignored. The embedding is N(0, 0.5) (not 0.02) so tied-head logits are spread
out enough to make parity comparisons meaningful.

    python -m weights.reference.make_random_model OUT [--seed 0] [--d-model 32] ...
"""

import argparse
import math
import sys

import torch

from weights import canonical

DEFAULTS = dict(vocab_size=264, d_model=32, n_layers=2, d_inner=64, d_state=8, d_conv=4, dt_rank=4)


def random_mamba_tensors(config, seed=0, dtype=torch.float32):
    """Canonical tensors for `config` drawn from a seeded generator."""
    g = torch.Generator().manual_seed(seed)

    def uniform(shape, bound):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    def normal(shape, std):
        return torch.randn(shape, generator=g, dtype=torch.float64) * std

    V, D = config["vocab_size"], config["d_model"]
    t = {"embed.weight": normal((V, D), 0.5),
         "final_norm.weight": 1 + normal((D,), 0.1)}
    if not config["tie_embeddings"]:
        t["lm_head.weight"] = normal((V, D), 0.5)
    for i, b in enumerate(config["blocks"]):
        E, N, K, R = b["d_inner"], b["d_state"], b["d_conv"], b["dt_rank"]
        p = f"blocks.{i}."
        t[p + "norm.weight"] = 1 + normal((D,), 0.1)
        t[p + "in_proj.weight"] = uniform((2 * E, D), 1 / math.sqrt(D))
        if b["in_proj_bias"]:
            t[p + "in_proj.bias"] = uniform((2 * E,), 1 / math.sqrt(D))
        t[p + "conv.weight"] = uniform((E, K), 1 / math.sqrt(K))
        if b["conv_bias"]:
            t[p + "conv.bias"] = uniform((E,), 1 / math.sqrt(K))
        t[p + "x_proj.weight"] = uniform((R + 2 * N, E), 1 / math.sqrt(E))
        t[p + "dt_proj.weight"] = uniform((E, R), 1 / math.sqrt(R))
        dt = torch.exp(torch.rand(E, generator=g, dtype=torch.float64)
                       * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
        t[p + "dt_proj.bias"] = dt + torch.log(-torch.expm1(-dt))   # softplus^-1(dt)
        A_log = torch.log(torch.arange(1, N + 1, dtype=torch.float64)).repeat(E, 1)
        t[p + "A"] = -torch.exp(A_log + normal((E, N), 0.1))
        t[p + "D"] = 1 + normal((E,), 0.1)
        t[p + "out_proj.weight"] = uniform((D, E), 1 / math.sqrt(E))
        if b["out_proj_bias"]:
            t[p + "out_proj.bias"] = uniform((D,), 1 / math.sqrt(E))
        # Drawn last so that models without these norms keep their weights.
        for name, shape in canonical.dt_bc_norm_shapes(p, b).items():
            t[name] = 1 + normal(shape, 0.2)
    return {k: v.to(canonical.stored_dtype(k, dtype)) for k, v in t.items()}


def make_random_model(out_dir, seed=0, dtype="f32", name="random-mamba", **dims):
    """Write a random canonical model with a byte tokenizer to `out_dir` (must not exist)."""
    d = dict(DEFAULTS, **dims)
    config = canonical.mamba_config(name=name, eos_token_id=canonical.BYTE_EOS, **d)
    tensors = random_mamba_tensors(config, seed, canonical.DTYPES[dtype])
    canonical.write_model_dir(out_dir, config, tensors,
                              {"source": f"random seed={seed}",
                               "converter": "make_random_model@1"},
                              tokenizer=canonical.byte_tokenizer())
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=sorted(canonical.DTYPES), default="f32")
    ap.add_argument("--name", default="random-mamba")
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    ap.add_argument("--untied", action="store_true", help="store a separate lm_head.weight")
    a = ap.parse_args(argv)
    dims = {k: getattr(a, k) for k in DEFAULTS}
    try:
        make_random_model(a.out, seed=a.seed, dtype=a.dtype, name=a.name,
                          tie_embeddings=not a.untied, **dims)
    except (canonical.CanonicalError, OSError) as e:
        print(f"make_random_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

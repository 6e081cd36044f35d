"""Per layer kind: decode tokens/s at batch 1 and 32, prefill tokens/s, and batch-1
time per token at context 2k vs 64k, on the CPU backend; for SeqBoat also at GAU
activation rates of about 0 %, 25 % and 100 % (measured by the engine, printed); for
moe also the routings of Nemotron-H (sigmoid group top-k, latent space, shared
expert) and Granite-4.0-H (top-2 SwiGLU experts beside a shared one).

    bazel build //bench:stack_bench
    .venv/bin/python bench/layer_kinds_bench.py [--d-model 512] [--long-context 65536]
        [--kinds mamba1,gdn]

Each model is 4 blocks of one kind (d_model 512, byte vocabulary) with random
weights at stable scales; the figures are speed, not quality.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from weights.reference.random_any import block, write_model  # noqa: E402


KINDS = ("mamba1", "mamba2", "gdn", "seqboat", "attention", "s4d", "mlp", "moe")


def moe_variants(d):
    """(label, block) of the MoE layers of Nemotron-H and Granite-4.0-H at width d."""
    base = block("moe", d)
    nemotron = {**base, "routing": "sigmoid_group_topk", "n_experts": 16, "d_ff": d,
                "act": "relu2", "top_k": 4, "renormalize": True, "n_group": 4,
                "topk_group": 2, "routed_scale": 2.5, "latent": d // 2,
                "shared": {"d_ff": 2 * d, "gate": None}}
    granite = {**base, "n_experts": 16, "d_ff": d // 2, "act": "silu", "gated": True,
               "top_k": 2, "renormalize": True, "shared": {"d_ff": d, "gate": None},
               "residual_scale": 0.5}
    return (("moe x4 sigmoid group top-4 of 16, latent d/2 (Nemotron-H)", nemotron),
            ("moe x4 top-2 of 16 + shared SwiGLU (Granite-4.0-H)", granite))


def run(binary, model, label, long_context):
    res = subprocess.run([str(binary), f"--model_dir={model}", f"--label={label}",
                          "--batches=1,32", f"--long_context={long_context}"],
                         capture_output=True, text=True)
    print(res.stdout.strip() if res.returncode == 0 else f"{label}: FAILED {res.stderr}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--long-context", type=int, default=65536)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated; SeqBoat's activation rates run with seqboat")
    a = ap.parse_args()
    binary = ROOT / "bazel-bin/bench/stack_bench"
    if not binary.exists():
        sys.exit(f"{binary} missing: bazel build //bench:stack_bench")
    d = a.d_model
    with tempfile.TemporaryDirectory() as tmp:
        kinds = [k for k in a.kinds.split(",") if k]
        for kind in kinds:
            out = os.path.join(tmp, kind)
            write_model(out, [block(kind, d) for _ in range(4)], d)
            run(binary, out, f"{kind} x4", a.long_context)
        for i, (label, blk) in enumerate(moe_variants(d) if "moe" in kinds else ()):
            out = os.path.join(tmp, f"moe_variant{i}")
            write_model(out, [dict(blk) for _ in range(4)], d)
            run(binary, out, label, a.long_context)
        # SeqBoat at three activation rates: the router's bias moves the decision
        # boundary (u1 - u0 > 0); rates printed are what the engine measured.
        rates = (("~0%", (8.0, -8.0)), ("~25%", (0.35, 0.0)), ("100%", (-8.0, 8.0)))
        for label, bias in (rates if "seqboat" in kinds else ()):
            out = os.path.join(tmp, "seqboat" + label.replace("%", "").replace("~", ""))
            write_model(out, [block("seqboat", d) for _ in range(4)], d,
                        router_bias=lambda i, b=bias: torch.tensor(b))
            run(binary, out, f"seqboat x4 activation {label}", 0)


if __name__ == "__main__":
    main()

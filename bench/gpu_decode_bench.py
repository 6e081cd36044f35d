"""Decode tokens/s on the GPU for a 130M-parameter Mamba shape, the Mamba-2 130M
shape and a hybrid of the same size, with the fraction of the memory-bandwidth
roofline reached.

    bazel build //bench:cuda_decode_bench
    .venv/bin/python bench/gpu_decode_bench.py [--batches 1,16,64,256]

The models have random weights at realistic scales (the figures depend on
shapes only) and the GPT-NeoX vocabulary size 50280 (Mamba-2: 50288, as
state-spaces/mamba2-130m pads it; head_dim 64, d_state 128). The hybrid interleaves
every layer kind around Mamba blocks: 16 mamba1, 2 attention (4 sinks + 1020
window, GQA 8/2), 2 gated mlp, 1 moe (8 experts, top-1), 2 s4d, 1 seqboat.
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from weights import canonical  # noqa: E402
from weights.reference import random_any, random_blocks  # noqa: E402
from weights.reference.make_random_model import make_random_model  # noqa: E402

D, VOCAB = 768, 50280
HYBRID = ["mamba1", "mamba1", "attention", "mlp", "mamba1", "mamba1", "seqboat", "mamba1",
          "mamba1", "s4d", "mamba1", "moe", "mamba1", "mamba1", "attention", "mlp",
          "mamba1", "mamba1", "s4d", "mamba1", "mamba1", "mamba1", "mamba1", "mamba1"]


def hybrid_blocks():
    blocks = []
    for kind in HYBRID:
        over = {"d_ff": D} if kind == "moe" else {}
        blocks.append(random_any.block(kind, D, **over))
    return blocks


def params(model_dir):
    from weights import safetensors_io
    tensors, _ = safetensors_io.load_file(os.path.join(model_dir, "model.safetensors"))
    return sum(t.numel() for t in tensors.values())


def write_models(out_dir):
    """Writes both models under `out_dir`; returns [(label, path)]."""
    mamba = os.path.join(out_dir, "mamba-130m")
    make_random_model(mamba, seed=1, name="mamba-130m-shape", vocab_size=VOCAB,
                      d_model=D, n_layers=24, d_inner=2 * D, d_state=16, d_conv=4,
                      dt_rank=48)
    mamba2 = os.path.join(out_dir, "mamba2-130m")
    block = canonical.mamba2_block(n_heads=2 * D // 64, head_dim=64, d_state=128, n_groups=1,
                                   d_conv=4)
    random_blocks.write_random_model(mamba2, random_blocks.hybrid_config(
        [block] * 24, name="mamba2-130m-shape", vocab_size=50288, d_model=D), seed=3)
    hybrid = os.path.join(out_dir, "hybrid")
    random_any.write_model(hybrid, hybrid_blocks(), D, seed=2, vocab_size=VOCAB)
    return [("mamba-130m", mamba), ("mamba2-130m", mamba2), ("hybrid", hybrid)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--weights", default="bf16")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--binary", default=os.path.join(
        ROOT, "bazel-bin/bench/cuda_decode_bench"))
    ap.add_argument("--write_models", metavar="DIR",
                    help="only write the models to DIR/mamba-130m, DIR/mamba2-130m and "
                         "DIR/hybrid "
                         "(for the server sweep and the profiler)")
    a = ap.parse_args()
    if a.write_models:
        write_models(a.write_models)
        return
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} missing: bazel build //bench:cuda_decode_bench")
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in write_models(tmp):
            print(f"== {label}: {params(path) / 1e6:.1f}M parameters", flush=True)
            subprocess.run([a.binary, f"--model_dir={path}", f"--label={label}",
                            f"--batches={a.batches}", f"--weights={a.weights}",
                            f"--steps={a.steps}"], check=True)


if __name__ == "__main__":
    main()

"""Decode tokens/s on the GPU for a 130M-parameter Mamba shape, the Mamba-2 130M
shape and a hybrid of the same size, with the fraction of the memory-bandwidth
roofline reached; with --sizes 130m,1b also at the sizes people serve: Mamba 1.4B
and 2.8B, Mamba-2 2.7B (state-spaces' widths and depths) and a ~1B hybrid.

    bazel build //bench:cuda_decode_bench
    .venv/bin/python bench/gpu_decode_bench.py [--batches 1,16,64,256] [--sizes 130m,1b]

The models have random weights at realistic scales (the figures depend on
shapes only) and the GPT-NeoX vocabulary size 50280 (Mamba-2: 50288, as
state-spaces/mamba2-130m pads it; head_dim 64, d_state 128). The hybrid interleaves
every layer kind around Mamba blocks: 16 mamba1, 2 attention (4 sinks + 1020
window, GQA 8/2), 2 gated mlp, 1 moe (8 experts, top-1), 2 s4d, 1 seqboat.
The timed steps are decode steps, so the Mamba-2 models run the fused Mamba2Step kernels
(gate norm_after_gate, d_conv 4, d_state <= 256) and the Mamba models the decode scan.
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


def hybrid_blocks(d=D, kinds=HYBRID):
    blocks = []
    for kind in kinds:
        over = {"d_ff": d} if kind == "moe" else {}
        blocks.append(random_any.block(kind, d, **over))
    return blocks


def write_mamba(path, seed, d, layers, dtype="f32"):
    make_random_model(path, seed=seed, dtype=dtype, name=f"{os.path.basename(path)}-shape",
                      vocab_size=VOCAB, d_model=d, n_layers=layers, d_inner=2 * d, d_state=16,
                      d_conv=4, dt_rank=-(-d // 16))


def write_mamba2(path, seed, d, layers, dtype="f32"):
    block = canonical.mamba2_block(n_heads=2 * d // 64, head_dim=64, d_state=128, n_groups=1,
                                   d_conv=4)
    random_blocks.write_random_model(path, random_blocks.hybrid_config(
        [block] * layers, name=f"{os.path.basename(path)}-shape", vocab_size=50288,
        d_model=d), seed=seed, dtype=dtype)


# What each size writes: (label, writer, its arguments). The 130M shapes are
# the ones every earlier figure used; the larger ones are written in bf16 (what
# the benchmark serves them in) to halve the time and disk they take.
SIZES = {
    "130m": [("mamba-130m", write_mamba, (1, D, 24)),
             ("mamba2-130m", write_mamba2, (3, D, 24)),
             ("hybrid", lambda p, seed: random_any.write_model(
                 p, hybrid_blocks(), D, seed=seed, vocab_size=VOCAB), (2,))],
    "1b": [("mamba-1.4b", write_mamba, (4, 2048, 48, "bf16")),
           ("mamba-2.8b", write_mamba, (5, 2560, 64, "bf16")),
           ("mamba2-2.7b", write_mamba2, (6, 2560, 64, "bf16")),
           # The 130M hybrid's pattern and its first eight blocks again, at
           # width 2048: 32 blocks, ~1B parameters.
           ("hybrid-1b", lambda p, seed: random_any.write_model(
               p, hybrid_blocks(2048, HYBRID + HYBRID[:8]), 2048, seed=seed,
               vocab_size=VOCAB), (7,))],
}


def params(model_dir):
    from weights import safetensors_io
    tensors, _ = safetensors_io.load_file(os.path.join(model_dir, "model.safetensors"))
    return sum(t.numel() for t in tensors.values())


def write_models(out_dir, sizes=("130m",), only=None):
    """Writes the models of `sizes` under `out_dir` (those named in `only`, if
    given), skipping any already there; returns [(label, path)]."""
    written = []
    for size in sizes:
        if size not in SIZES:
            sys.exit(f"unknown size {size!r}: one of {', '.join(SIZES)}")
        for label, writer, args in SIZES[size]:
            if only is not None and label not in only:
                continue
            path = os.path.join(out_dir, label)
            if not os.path.exists(os.path.join(path, "model.safetensors")):
                writer(path, *args)
            written.append((label, path))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--weights", default="bf16",
                    help="comma-separated CUDA weight types, each run in turn: bf16, fp16, "
                         "fp32, fp8 (e4m3, Ada/Hopper)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--binary", default=os.path.join(
        ROOT, "bazel-bin/bench/cuda_decode_bench"))
    ap.add_argument("--sizes", default="130m",
                    help="comma-separated: 130m (Mamba, Mamba-2, hybrid), 1b (Mamba 1.4B and "
                         "2.8B, Mamba-2 2.7B, a ~1B hybrid)")
    ap.add_argument("--models", default="",
                    help="comma-separated labels: only these of the sizes' models")
    ap.add_argument("--write_models", metavar="DIR",
                    help="only write the models to DIR/<label> (for the server sweep and the "
                         "profiler)")
    a = ap.parse_args()
    sizes = [s for s in a.sizes.split(",") if s]
    only = [m for m in a.models.split(",") if m] or None
    if a.write_models:
        for label, path in write_models(a.write_models, sizes, only):
            print(f"{label}: {path}")
        return
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} missing: bazel build //bench:cuda_decode_bench")
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in write_models(tmp, sizes, only):
            print(f"== {label}: {params(path) / 1e6:.1f}M parameters", flush=True)
            for weights in [w for w in a.weights.split(",") if w]:
                subprocess.run([a.binary, f"--model_dir={path}", f"--label={label}",
                                f"--batches={a.batches}", f"--weights={weights}",
                                f"--steps={a.steps}"], check=True)


if __name__ == "__main__":
    main()

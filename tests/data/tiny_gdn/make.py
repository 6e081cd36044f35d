"""Regenerates this directory: a tiny random Qwen3.5-shaped model, Gated DeltaNet
blocks (two value heads per key head, then one per key head) with a gated
attention block (per-head q/k norm, sigmoid output gate, a quarter of each head
rotated), an mlp and a top-2 moe with a gated shared expert, for the engine's
tests of those kinds (prefix reuse, n > 1, the overlapped loop).

    .venv/bin/python tests/data/tiny_gdn/make.py
"""

import os
import pathlib
import shutil
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from weights.reference.random_any import block, write_model  # noqa: E402

D = 32
BLOCKS = [
    block("gdn", D, n_k_heads=2, n_v_heads=4, head_k_dim=8, head_v_dim=8),
    block("mlp", D, d_ff=64),
    block("gdn", D, n_k_heads=2, n_v_heads=2, head_k_dim=12, head_v_dim=16, d_conv=3),
    block("attention", D, n_heads=4, n_kv_heads=2, head_dim=16, rotary_dim=4, sinks=4,
          window=60, qk_norm={"type": "rmsnorm", "eps": 1e-6}, out_gate="sigmoid"),
    block("moe", D, n_experts=4, d_ff=24, top_k=2, renormalize=True, gated=True, act="silu",
          shared={"d_ff": 40, "gate": "sigmoid"}),
]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model")
        write_model(out, BLOCKS, D, seed=5)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            shutil.copyfile(os.path.join(out, name), HERE / name)


if __name__ == "__main__":
    main()

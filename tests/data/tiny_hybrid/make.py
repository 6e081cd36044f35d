"""Regenerates this directory: a tiny random model whose stack holds every block
kind the engine runs (mamba1, seqboat, attention with sinks, top-1 moe, s4d, mlp,
mamba2 with two B/C groups).

    .venv/bin/python tests/data/tiny_hybrid/make.py
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
    block("mamba1", D, d_inner=64, d_state=8, dt_rank=2),
    block("seqboat", D, ema_dim=4, z_dim=16, v_dim=48, window=16),
    block("attention", D, n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16),
    block("moe", D, n_experts=4, d_ff=64),
    block("s4d", D, modes=8),
    block("mlp", D, d_ff=64),
    block("mamba1", D, d_inner=64, d_state=8, dt_rank=2),
    block("mamba2", D, n_heads=4, head_dim=16, d_state=8, n_groups=2),
]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model")
        write_model(out, BLOCKS, D, seed=3)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            shutil.copyfile(os.path.join(out, name), HERE / name)


if __name__ == "__main__":
    main()

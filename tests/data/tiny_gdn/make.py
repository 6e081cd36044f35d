"""Regenerates this directory: a tiny random model of Gated DeltaNet blocks (two
value heads per key head, then one per key head) around an mlp, for the engine's
tests of the gdn kind (prefix reuse, n > 1, the overlapped loop).

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
]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model")
        write_model(out, BLOCKS, D, seed=5)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            shutil.copyfile(os.path.join(out, name), HERE / name)


if __name__ == "__main__":
    main()

"""The final norm of every kind the engine accepts (rmsnorm, layernorm and
scalenorm, each with and without affine, and none) gives the reference's
logits."""

import subprocess

import numpy as np
import pytest
import torch

from weights import safetensors_io
from weights.reference import logits as ref_logits
from weights.reference.random_any import block, write_model

NORMS = {
    "rmsnorm": {"type": "rmsnorm", "eps": 1e-5, "affine": True},
    "layernorm": {"type": "layernorm", "eps": 1e-5, "affine": True},
    "layernorm_no_affine": {"type": "layernorm", "eps": 1e-5, "affine": False},
    "rmsnorm_no_affine": {"type": "rmsnorm", "eps": 1e-5, "affine": False},
    "scalenorm": {"type": "scalenorm", "eps": 1e-5, "affine": True},
    "scalenorm_no_affine": {"type": "scalenorm", "eps": 1e-5, "affine": False},
    "none": None,
}


def spread_final_norm(model):
    """Random models hold unit norm weights and zero biases; move the final
    norm's off them, so that a weight, bias or scalar the engine dropped shows."""
    path = model / "model.safetensors"
    tensors, meta = safetensors_io.load_file(path)
    g = torch.Generator().manual_seed(9)
    for name, t in tensors.items():
        if name.startswith("final_norm."):
            base = 0.0 if name.endswith(".bias") else 1.5
            tensors[name] = base + 0.3 * torch.randn(t.shape, generator=g)
    safetensors_io.save_file(tensors, path, meta)


@pytest.mark.parametrize("name", sorted(NORMS))
def test_final_norm(tmp_path, engine_logits, name):
    model = tmp_path / "m"
    write_model(model, [block("mamba1", 32, d_inner=64, d_state=8, dt_rank=2)] * 2, 32,
                seed=4, final_norm=NORMS[name])
    spread_final_norm(model)
    toks = [(i * 29 + 5) % 256 for i in range(48)]
    ref = tmp_path / "ref.npy"
    ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)), "--out",
                     str(ref), "--float64"])
    out = tmp_path / "got.npy"
    subprocess.run([str(engine_logits), "--model", str(model), "--tokens",
                    ",".join(map(str, toks)), "--out", str(out), "--chunk", "5"],
                   check=True, capture_output=True)
    want = np.load(ref)
    assert np.abs(np.load(out) - want).max() <= 1e-4

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from weights import canonical, safetensors_io
from weights.reference.make_random_model import make_random_model
from weights.reference.model import ReferenceModel

from step_form import step_logits

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TINY = os.path.join(ROOT, "tests", "data", "tiny_mamba")
TOKENS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 256, 0, 255, 263, 7]


def test_tiny_model_is_as_specified():
    with open(os.path.join(TINY, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["vocab_size"] == 264 and cfg["d_model"] == 32 and cfg["tie_embeddings"]
    assert cfg["eos_token_id"] == 256 and cfg["bos_token_id"] is None
    assert [b["kind"] for b in cfg["blocks"]] == ["mamba1", "mamba1"]
    b = cfg["blocks"][0]
    assert (b["d_inner"], b["d_state"], b["d_conv"], b["dt_rank"]) == (64, 8, 4, 4)
    with open(os.path.join(TINY, "tokenizer.json")) as f:
        assert json.load(f) == canonical.byte_tokenizer()
    t, meta = safetensors_io.load_file(os.path.join(TINY, "model.safetensors"))
    assert meta["format"] == "seqboat-canonical" and meta["version"] == "1"
    assert "lm_head.weight" not in t
    assert t["blocks.1.A"].dtype == torch.float32 and (t["blocks.1.A"] < 0).all()
    assert t["blocks.0.conv.weight"].shape == (64, 4)
    assert t["blocks.0.x_proj.weight"].shape == (4 + 16, 64)


def test_random_model_is_deterministic(tmp_path):
    make_random_model(tmp_path / "a", seed=0, name="tiny-mamba")
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (tmp_path / "a" / f).read_bytes() == open(os.path.join(TINY, f), "rb").read(), f
    make_random_model(tmp_path / "b", seed=1, name="tiny-mamba")
    assert (tmp_path / "b" / "model.safetensors").read_bytes() != (tmp_path / "a" / "model.safetensors").read_bytes()


def test_parallel_form_matches_independent_step_form():
    ref = ReferenceModel.load(TINY, torch.float64).forward(TOKENS)
    step = step_logits(TINY, TOKENS)
    assert ref.shape == (len(TOKENS), 264)
    assert ref.std() > 1.0                    # logits are not trivially flat
    assert torch.allclose(ref, step, rtol=0, atol=1e-10), (ref - step).abs().max()


@pytest.mark.parametrize("opts", [dict(untied=True), dict(biases=True)])
def test_step_form_agreement_with_optional_tensors(tmp_path, opts):
    dims = dict(d_model=24, n_layers=3, d_inner=40, d_state=5, d_conv=3, dt_rank=3)
    cfg = canonical.mamba_config(name="x", vocab_size=264, **dims,
                                 tie_embeddings=not opts.get("untied"),
                                 in_proj_bias=bool(opts.get("biases")),
                                 out_proj_bias=bool(opts.get("biases")),
                                 conv_bias=not opts.get("biases"))
    from weights.reference.make_random_model import random_mamba_tensors
    canonical.write_model_dir(tmp_path / "m", cfg, random_mamba_tensors(cfg, 3), {"source": "t"})
    ref = ReferenceModel.load(tmp_path / "m", torch.float64).forward(TOKENS)
    assert torch.allclose(ref, step_logits(tmp_path / "m", TOKENS), rtol=0, atol=1e-10)


def test_prefix_causality():
    """Logits at position t must not depend on tokens after t."""
    m = ReferenceModel.load(TINY, torch.float64)
    full = m.forward(TOKENS)
    part = m.forward(TOKENS[:5])
    assert torch.allclose(full[:5], part, rtol=0, atol=1e-12)
    changed = m.forward(TOKENS[:5] + [9] * (len(TOKENS) - 5))
    assert not torch.allclose(full[5:], changed[5:])


def test_float32_close_to_float64():
    l32 = ReferenceModel.load(TINY, torch.float32).forward(TOKENS).double()
    l64 = ReferenceModel.load(TINY, torch.float64).forward(TOKENS)
    assert (l32 - l64).abs().max() < 1e-4


def test_logits_cli(tmp_path):
    out = tmp_path / "l.npy"
    cmd = [sys.executable, "-m", "weights.reference.logits", "--model", TINY,
           "--tokens", ",".join(map(str, TOKENS)), "--out", str(out), "--float64"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    got = np.load(out)
    assert got.dtype == np.float64 and got.shape == (len(TOKENS), 264)
    np.testing.assert_array_equal(got, ReferenceModel.load(TINY, torch.float64).forward(TOKENS).numpy())
    bad = subprocess.run([sys.executable, "-m", "weights.reference.logits", "--model", TINY,
                          "--tokens", "1,264", "--out", str(tmp_path / "bad.npy")],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "out of range" in bad.stderr
    assert not (tmp_path / "bad.npy").exists()

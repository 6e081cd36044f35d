"""The engine's Mamba-2 block equals the float64 reference (weights/reference/mamba2.py,
the chunked SSD form with mamba_ssm's grouping) token by token and under chunked
prefill, and chunked prefill leaves the state token-by-token decode leaves.

Shapes stress the indexing: head_dim != 64, d_state not a power of two, n_groups
1, 2 and 3 (heads map to groups as h // (H/G) and the gated norm is per group),
biases, a 3-tap conv without bias, a clamped Δ, untied heads, prefill chunks that
do not divide the prompt, and a block's residual_scale.
"""

import numpy as np
import pytest
import torch

from tests.python.parity.hybrid_util import (TOKENS, check_chunked_vs_step,
                                             check_step_vs_reference, make_model, mamba1,
                                             mamba2, mlp, reference, run_engine, tokens)
from weights.reference import mamba2 as mamba2_ref

CASES = {
    "g1_hd16_n12": ([mamba2(), mamba2()], {}),
    "g2_hd12_n20_biases_untied": (
        [mamba2(n_heads=6, head_dim=12, d_state=20, n_groups=2, in_proj_bias=True,
                out_proj_bias=True), mlp()], {"tie_embeddings": False}),
    "g3_hd8_n10_conv3_clamped": (
        [mamba2(n_heads=6, head_dim=8, d_state=10, n_groups=3, d_conv=3, conv_bias=False,
                dt_min=0.01, dt_max=0.05), mamba1()], {}),
    "g2_hd24_n40": ([mamba2(n_heads=4, head_dim=24, d_state=40, n_groups=2)], {}),
    # Granite's residual_multiplier on the mixer and the MLP after it, and
    # Nemotron-H's squared-ReLU MLP.
    "residual_scaled_relu2": (
        [mamba2(n_groups=2, residual_scale=0.4),
         mlp(act="relu2", gated=False, bias=True, residual_scale=2.5), mamba2()], {}),
}


def model_of(tmp_path, case, seed):
    blocks, kw = CASES[case]
    return make_model(tmp_path, blocks, seed=seed, **kw)


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_by_step_matches_reference(tmp_path, engine_logits, case):
    model = model_of(tmp_path, case, seed=41)
    check_step_vs_reference(tmp_path, engine_logits, model, tokens(TOKENS, seed=7))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chunk", [7, 100])
def test_chunked_prefill_matches_reference(tmp_path, engine_logits, case, chunk):
    model = model_of(tmp_path, case, seed=42)
    toks = tokens(TOKENS, seed=8)
    expected = reference(model, toks, tmp_path / "ref.npy")
    got = run_engine(engine_logits, model, toks, tmp_path / "got.npy", chunk)
    assert expected.std() > 0.1
    assert np.abs(got - expected).max() <= 1e-4


@pytest.mark.parametrize("case", ["g1_hd16_n12", "g2_hd12_n20_biases_untied",
                                  "g3_hd8_n10_conv3_clamped"])
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, case):
    model = model_of(tmp_path, case, seed=43)
    check_chunked_vs_step(tmp_path, engine_logits, model, tokens(TOKENS, seed=9),
                          chunks=(7, 64, 100))


def test_grouped_semantics_are_what_the_comparison_checks(tmp_path, engine_logits,
                                                          monkeypatch):
    """With G = 2, HF 4.48.3's two departures (an ungrouped gated norm; heads
    tiled over groups as h mod G in prefill) each move the logits far beyond the
    tolerance, so the agreement above really pins mamba_ssm's semantics."""
    model = model_of(tmp_path, "g2_hd24_n40", seed=44)
    toks = tokens(64, seed=10)
    got = run_engine(engine_logits, model, toks, tmp_path / "got.npy", 16)
    assert np.abs(got - reference(model, toks, tmp_path / "ref.npy")).max() <= 1e-4

    grouped_norm = mamba2_ref.gated_rmsnorm
    with monkeypatch.context() as m:
        m.setattr(mamba2_ref, "gated_rmsnorm",
                  lambda y, z, w, groups, eps: grouped_norm(y, z, w, 1, eps))
        ungrouped = reference(model, toks, tmp_path / "ungrouped.npy")
    assert np.abs(got - ungrouped).max() > 1e-2
    with monkeypatch.context() as m:
        m.setattr(mamba2_ref, "head_groups", lambda H, G: torch.arange(H) % G)
        tiled = reference(model, toks, tmp_path / "tiled.npy")
    assert np.abs(got - tiled).max() > 1e-2

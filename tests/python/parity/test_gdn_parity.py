"""The engine's Gated DeltaNet block equals the float64 reference
(weights/reference/gdn.py, token by token and in UT/WY chunks) token by token and
under chunked prefill, and chunked prefill leaves the state token-by-token decode
leaves.

Shapes stress the indexing: one and several value heads per key head (the
repeat_interleave map), head dims that differ, a value head wider than a warp by a
partial one, a 3-tap conv, and the block beside the other kinds.
"""

import numpy as np
import pytest
import torch

from tests.python.parity.hybrid_util import (TOKENS, check_chunked_vs_step,
                                             check_step_vs_reference, gdn, make_model,
                                             mamba1, mlp, reference, run_engine, tokens)
from weights.reference import gdn as gdn_ref

CASES = {
    "r2_dk8_dv8": ([gdn(), gdn()], {}),
    "r1_dk12_dv6_conv3": ([gdn(n_k_heads=3, n_v_heads=3, head_k_dim=12, head_v_dim=6,
                               d_conv=3), mlp()], {}),
    "r3_dk16_dv40_untied": ([gdn(n_k_heads=1, n_v_heads=3, head_k_dim=16, head_v_dim=40),
                             mamba1()], {"tie_embeddings": False}),
}


def model_of(tmp_path, case, seed):
    blocks, kw = CASES[case]
    return make_model(tmp_path, blocks, seed=seed, **kw)


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_by_step_matches_reference(tmp_path, engine_logits, case):
    model = model_of(tmp_path, case, seed=51)
    check_step_vs_reference(tmp_path, engine_logits, model, tokens(TOKENS, seed=17))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chunk", [7, 100])
def test_chunked_prefill_matches_reference(tmp_path, engine_logits, case, chunk):
    model = model_of(tmp_path, case, seed=52)
    toks = tokens(TOKENS, seed=18)
    expected = reference(model, toks, tmp_path / "ref.npy")
    got = run_engine(engine_logits, model, toks, tmp_path / "got.npy", chunk)
    assert expected.std() > 0.1
    assert np.abs(got - expected).max() <= 1e-4


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, case):
    model = model_of(tmp_path, case, seed=53)
    check_chunked_vs_step(tmp_path, engine_logits, model, tokens(TOKENS, seed=19),
                          chunks=(7, 64, 100))


def test_head_map_is_what_the_comparison_checks(tmp_path, engine_logits, monkeypatch):
    """With two value heads per key head, tiling them (h mod H_k) instead of
    repeat_interleave moves the reference's logits far beyond the tolerance, so
    the agreement above pins the checkpoint's head map."""
    model = model_of(tmp_path, "r2_dk8_dv8", seed=54)
    toks = tokens(64, seed=20)
    got = run_engine(engine_logits, model, toks, tmp_path / "got.npy", 16)
    assert np.abs(got - reference(model, toks, tmp_path / "ref.npy")).max() <= 1e-4
    with monkeypatch.context() as m:
        m.setattr(gdn_ref, "key_heads", lambda Hv, Hk: torch.arange(Hv) % Hk)
        tiled = reference(model, toks, tmp_path / "tiled.npy")
    assert np.abs(got - tiled).max() > 1e-2

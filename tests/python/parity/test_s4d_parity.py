"""The engine's s4d recurrence equals the float64 reference's causal convolution."""

import pytest

from tests.python.parity.hybrid_util import (TOKENS, check_chunked_vs_step,
                                             check_step_vs_reference, make_model, mamba1,
                                             mlp, s4d, tokens)

CASES = {
    "conj_half_none": [s4d(), mlp(act="relu", gated=False, bias=True)],
    "conj_half_gelu_glu": [s4d(output="gelu_glu"), mlp(), mamba1()],
    "full_gelu_glu_rmsnorm": [
        s4d(state_layout="full", modes=24, output="gelu_glu",
            norm={"type": "rmsnorm", "eps": 1e-5}), mlp(act="gelu", gated=False)],
    "two_s4d_no_norm": [s4d(norm=None, modes=8), s4d(output="gelu_glu"), mlp()],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_by_step_matches_reference(tmp_path, engine_logits, case):
    model = make_model(tmp_path, CASES[case], seed=31)
    check_step_vs_reference(tmp_path, engine_logits, model, tokens(TOKENS, seed=5))


@pytest.mark.parametrize("case", ["conj_half_gelu_glu", "full_gelu_glu_rmsnorm"])
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, case):
    model = make_model(tmp_path, CASES[case], seed=32)
    check_chunked_vs_step(tmp_path, engine_logits, model, tokens(TOKENS, seed=6))

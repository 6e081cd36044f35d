"""The engine's mlp block inside a Mamba stack equals the float64 reference."""

import pytest

from tests.python.parity.hybrid_util import (TOKENS, check_chunked_vs_step,
                                             check_step_vs_reference, make_model, mamba1,
                                             mlp, tokens)

CASES = {
    "swiglu": [mamba1(), mlp(act="silu", gated=True), mamba1(), mlp(act="silu", gated=True)],
    "gelu_bias": [mamba1(), mlp(act="gelu", gated=False, bias=True, d_ff=96)],
    "gelu_tanh_gated_bias_layernorm": [
        mlp(act="gelu_tanh", gated=True, bias=True,
            norm={"type": "layernorm", "eps": 1e-5}), mamba1()],
    "relu_scalenorm_and_no_norm": [
        mamba1(), mlp(act="relu", norm={"type": "scalenorm", "eps": 1e-5}),
        mlp(act="relu", gated=True, norm=None)],
    "relu2_ungated_bias": [mamba1(), mlp(act="relu2", gated=False, bias=True)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_by_step_matches_reference(tmp_path, engine_logits, case):
    model = make_model(tmp_path, CASES[case], seed=11)
    check_step_vs_reference(tmp_path, engine_logits, model, tokens(TOKENS, seed=1))


def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits):
    model = make_model(tmp_path, CASES["gelu_bias"], seed=12)
    check_chunked_vs_step(tmp_path, engine_logits, model, tokens(TOKENS, seed=2))


def test_missing_gate_weight_is_named(tmp_path, engine_logits):
    """A gated config over ungated weights fails naming the missing tensor."""
    import json
    import subprocess
    model = make_model(tmp_path, [mamba1(), mlp(gated=False)], seed=13)
    cfg = json.loads((model / "config.json").read_text())
    cfg["blocks"][1]["gated"] = True
    (model / "config.json").write_text(json.dumps(cfg))
    proc = subprocess.run([str(engine_logits), "--model", str(model), "--tokens", "1,2",
                           "--out", str(tmp_path / "x.npy")], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "blocks.1.mlp.gate.weight" in proc.stderr

"""The engine's moe block (grouped expert dispatch) equals the float64 reference's
token-by-token dense evaluation of the chosen experts."""

import json
import subprocess

import pytest
import torch

from tests.python.parity.hybrid_util import (TOKENS, check_chunked_vs_step,
                                             check_step_vs_reference, make_model, mamba1,
                                             mlp, moe, tokens)
from weights.reference import moe as moe_ref
from weights.reference.model import ReferenceModel
from weights.reference.norms import apply_norm

CASES = {
    "switch_top1": [mamba1(), moe(), mamba1(), mlp()],
    "top2": [mamba1(), moe(top_k=2, act="gelu"), mamba1(), mlp()],
    "top2_renormalized_gated_biases": [
        mamba1(), moe(top_k=2, renormalize=True, gated=True, act="silu", router_bias=True,
                      expert_bias=True, norm={"type": "rmsnorm", "eps": 1e-5}), mlp()],
    "relu_dynamic": [
        mamba1(), moe(routing="relu_dynamic", router_hidden=8, act="relu", expert_bias=True,
                      router_bias=True), mamba1(), mlp()],
    "relu_dynamic_gated": [
        moe(routing="relu_dynamic", router_hidden=6, gated=True, act="silu"), mamba1()],
    # Qwen3.5-MoE / Qwen3-Next: top-k renormalised, SwiGLU experts and a
    # shared SwiGLU expert of another width behind a per-token sigmoid gate;
    # then a shared expert without a gate.
    "top2_shared_expert": [
        mamba1(), moe(top_k=2, renormalize=True, gated=True, act="silu",
                      norm={"type": "rmsnorm", "eps": 1e-6},
                      shared={"d_ff": 40, "gate": "sigmoid"}), mlp()],
    "shared_expert_ungated": [
        moe(top_k=1, act="relu", shared={"d_ff": 24, "gate": None}), mamba1()],
}


def routing_of_reference(model_dir, toks, block):
    """Per token, the experts the reference chose at `block` (on its own input)."""
    m = ReferenceModel.load(model_dir, torch.float64)
    from weights.reference.model import BLOCK_FORWARD
    r = m.t["embed.weight"][torch.as_tensor(toks)]
    for i, (blk, p) in enumerate(zip(m.config["blocks"], m.blocks)):
        if i == block:
            x = apply_norm(r, p, blk["norm"])
            return [[e for e, _ in moe_ref.route(x[t], p, blk)] for t in range(len(toks))]
        r = BLOCK_FORWARD[blk["kind"]](r, p, blk, m.config)
    raise AssertionError("no such block")


@pytest.mark.parametrize("case", sorted(CASES))
def test_step_by_step_matches_reference(tmp_path, engine_logits, case):
    model = make_model(tmp_path, CASES[case], seed=21)
    toks = tokens(TOKENS, seed=3)
    check_step_vs_reference(tmp_path, engine_logits, model, toks)
    # The case exercises routing: several experts are used, and for
    # relu_dynamic the number per token varies.
    block = next(i for i, b in enumerate(CASES[case]) if b["kind"] == "moe")
    chosen = routing_of_reference(model, toks, block)
    assert len({e for row in chosen for e in row}) >= 3
    if CASES[case][block]["routing"] == "relu_dynamic":
        assert len({len(row) for row in chosen}) >= 2


@pytest.mark.parametrize("case", ["switch_top1", "top2_renormalized_gated_biases",
                                  "relu_dynamic"])
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, case):
    model = make_model(tmp_path, CASES[case], seed=22)
    check_chunked_vs_step(tmp_path, engine_logits, model, tokens(TOKENS, seed=4))


def run_bad(engine_logits, model, tmp_path):
    proc = subprocess.run([str(engine_logits), "--model", str(model), "--tokens", "1,2",
                           "--out", str(tmp_path / "x.npy")], capture_output=True, text=True)
    assert proc.returncode != 0
    return proc.stderr


def test_expert_count_mismatch_names_the_tensor(tmp_path, engine_logits):
    model = make_model(tmp_path, [mamba1(), moe(n_experts=4)], seed=23)
    cfg = json.loads((model / "config.json").read_text())
    cfg["blocks"][1]["n_experts"] = 5
    (model / "config.json").write_text(json.dumps(cfg))
    err = run_bad(engine_logits, model, tmp_path)
    assert "blocks.1.moe.router.weight" in err and "[5, 32]" in err.replace(",32", ", 32")


@pytest.mark.parametrize("field,value,words", [
    ("routing", "top2_sinkhorn", ["blocks[1] (moe)", '"routing"']),
    ("act", "tanh", ["blocks[1] (moe)", '"act"']),
    ("top_k", 5, ["blocks[1] (moe)", '"top_k"', "n_experts = 4"]),
    ("d_ff", 0, ["blocks[1] (moe)", '"d_ff"']),
    ("capacity", 64, ["blocks[1] (moe)", '"capacity"']),
    ("shared", {"d_ff": 0}, ["blocks[1] (moe)", '"d_ff"']),
    ("shared", {"d_ff": 8, "gate": "softmax"}, ["blocks[1] (moe)", '"gate"']),
    ("shared", {"d_ff": 8, "width": 3}, ["blocks[1] (moe)", '"width"']),
])
def test_bad_moe_config_names_block_and_field(tmp_path, engine_logits, field, value, words):
    model = make_model(tmp_path, [mamba1(), moe(n_experts=4)], seed=24)
    cfg = json.loads((model / "config.json").read_text())
    cfg["blocks"][1][field] = value
    (model / "config.json").write_text(json.dumps(cfg))
    err = run_bad(engine_logits, model, tmp_path)
    for w in words:
        assert w in err, err

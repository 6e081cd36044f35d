"""hf-granite-moe-hybrid on the golden checkpoints transformers 5.23 wrote
(tests/data/hf_golden/granite_4_h, dense Granite-4.0-H without positions,
granite_4_h_rope, with RoPE and biases, and granite_4_h_moe, with experts
beside the shared MLP): the float64 reference on the converted
directory gives transformers' logits, the four scalars land
where the engine reads them, and every checkpoint it cannot serve is refused
naming the field or tensor, with nothing left behind. The engine's side is
tests/python/parity/test_hf_golden_parity.py."""

import json
import pathlib
import shutil

import numpy as np
import pytest
import torch

from weights import safetensors_io
from weights.reference.model import ReferenceModel

import converter_cases
from convert_cli import assert_clean_failure, edit_config, edit_tensors, run

GOLDENS = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden"
GOLDEN = GOLDENS / "granite_4_h"
MOE = GOLDENS / "granite_4_h_moe"
SOURCE = "hf-granite-moe-hybrid"


def copy(tmp_path):
    return pathlib.Path(shutil.copytree(GOLDEN / "hf", tmp_path / "hf"))


def convert(src, out, capsys, *extra):
    code, err = run(["--source", SOURCE, str(src), str(out), "--byte-tokenizer", *extra],
                    capsys)
    assert code == 0, err
    return json.loads((out / "config.json").read_text())


def reference_logits(out, golden=GOLDEN):
    prompt = json.loads((golden / "golden.json").read_text())["prompt"]
    return ReferenceModel.load(out, torch.float64).forward(prompt)


def golden_logits(golden=GOLDEN):
    return torch.from_numpy(np.load(golden / "logits.npy")).double()


@pytest.mark.parametrize("name", ["granite_4_h", "granite_4_h_rope", "granite_4_h_moe"])
def test_reference_on_the_conversion_gives_transformers_logits(name, tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(GOLDENS / name / "hf", out, capsys, "--sinks", "4", "--window", "252")
    rope = name.endswith("rope")
    assert cfg["blocks"][2]["pos"] == ("rope_half" if rope else "none")
    assert cfg["blocks"][2]["qkv_bias"] is rope and cfg["blocks"][0]["in_proj_bias"] is rope
    err = (reference_logits(out, GOLDENS / name) - golden_logits(GOLDENS / name)).abs().max()
    assert err <= 1e-4, err


def test_the_four_scalars_and_the_blocks(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(GOLDEN / "hf", out, capsys)
    assert [b["kind"] for b in cfg["blocks"]] == (
        ["mamba2", "mlp", "attention", "mlp"] + ["mamba2", "mlp"] * 2 + ["attention", "mlp"])
    assert cfg["embed"]["scale"] == 1.5 and cfg["logit_scale"] == 2.0   # 1 / logits_scaling
    assert all(b["residual_scale"] == 1.8 for b in cfg["blocks"])
    attn, mamba = cfg["blocks"][2], cfg["blocks"][0]
    assert attn["scale"] == 0.5 and attn["pos"] == "none" and attn["head_dim"] == 16
    assert (mamba["n_heads"], mamba["head_dim"], mamba["n_groups"]) == (8, 16, 2)
    assert mamba["dt_min"] == 0.0 and mamba["dt_max"] is None
    assert cfg["tie_embeddings"] is True and cfg["blocks"][1]["d_ff"] == 80
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    src, _ = safetensors_io.load_file(GOLDEN / "hf" / "model.safetensors")
    both = src["model.layers.0.shared_mlp.input_linear.weight"]
    assert torch.equal(t["blocks.1.mlp.gate.weight"], both[:80])
    assert torch.equal(t["blocks.1.mlp.up.weight"], both[80:])


def test_each_scalar_matters(tmp_path, capsys):
    """Dropping any one scalar from the converted config moves the reference
    away from transformers: none of them is a no-op in the golden model."""
    out = tmp_path / "out"
    cfg = convert(GOLDEN / "hf", out, capsys, "--sinks", "4", "--window", "252")
    want = golden_logits()
    edits = {"embed": lambda c: c["embed"].update(scale=1.0),
             "logits": lambda c: c.update(logit_scale=1.0),
             "residual": lambda c: [b.update(residual_scale=1.0) for b in c["blocks"]],
             "attention": lambda c: [b.pop("scale") for b in c["blocks"]
                                     if b["kind"] == "attention"]}
    for name, edit in edits.items():
        changed = json.loads(json.dumps(cfg))
        edit(changed)
        (out / "config.json").write_text(json.dumps(changed))
        err = (reference_logits(out) - want).abs().max()
        assert err > 1e-2, (name, err)


def test_rope_converts_to_full_half_split_rope(tmp_path, capsys):
    src = copy(tmp_path)
    edit_config(src, lambda c: c.update(position_embedding_type="rope"))
    cfg = convert(src, tmp_path / "out", capsys)
    attn = cfg["blocks"][2]
    assert attn["pos"] == "rope_half" and attn["rope_theta"] == 10000.0
    code, err = run(["--source", SOURCE, str(src), str(tmp_path / "out2"), "--byte-tokenizer",
                     "--window", "600"], capsys)
    assert_clean_failure(tmp_path / "out2", code, err, "max_position_embeddings 512")


BAD_CONFIGS = {
    "architecture": (lambda c: c.update(model_type="granitemoe"), ["model_type='granitemoe'"]),
    # The dense golden holds no experts: asked for, they are missing by name.
    "experts": (lambda c: c.update(num_local_experts=8),
                ["model.layers.0.block_sparse_moe.input_linear.weight"]),
    "experts_absent": (lambda c: c.pop("num_local_experts"),
                       ["model.layers.0.block_sparse_moe.input_linear.weight"]),
    "experts_negative": (lambda c: c.update(num_local_experts=-1), ["num_local_experts"]),
    "position": (lambda c: c.update(position_embedding_type="alibi"),
                 ["position_embedding_type", "alibi"]),
    "rope_type": (lambda c: c.update(position_embedding_type="rope",
                                     rope_parameters={"rope_type": "yarn", "factor": 2.0}),
                  ["rope_type", "yarn"]),
    "layer_types": (lambda c: c.update(layer_types=["mamba"] * 4), ["layer_types", "5 layers"]),
    "layer_kind": (lambda c: c["layer_types"].__setitem__(0, "mlp"), ["layer_types"]),
    "d_head": (lambda c: c.update(mamba_d_head=12), ["mamba_d_head", "128"]),
    "groups": (lambda c: c.update(mamba_n_groups=3), ["mamba_n_groups"]),
    "activation": (lambda c: c.update(hidden_act="gelu"), ["hidden_act"]),
    "residual_multiplier": (lambda c: c.update(residual_multiplier=0), ["residual_multiplier"]),
    "logits_scaling": (lambda c: c.update(logits_scaling=None), ["logits_scaling"]),
    "time_step_limit": (lambda c: c.update(time_step_limit=[1.0, 0.5]), ["time_step_limit"]),
}


test_bad_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "hf", edit_config, BAD_CONFIGS)


L0 = "model.layers.0."
BAD_TENSORS = {
    "shared_mlp_rows": (lambda t: t.update({L0 + "shared_mlp.input_linear.weight":
                                            torch.zeros(80, 64)}),
                        [L0 + "shared_mlp.input_linear.weight", "[160, 64]"]),
    "experts": (lambda t: t.update({L0 + "block_sparse_moe.router.layer.weight":
                                    torch.zeros(8, 64)}),
                ["unknown tensor", "block_sparse_moe.router.layer.weight"]),
    "missing_gated_norm": (lambda t: t.pop(L0 + "mamba.norm.weight"),
                           [L0 + "mamba.norm.weight"]),
    "untied_head": (lambda t: t.update({"lm_head.weight": torch.zeros(257, 64)}),
                    ["lm_head.weight", "differs from the embedding"]),
}


test_bad_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "hf", edit_tensors, BAD_TENSORS)


def test_experts_become_a_moe_block_with_the_shared_mlp(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(MOE / "hf", out, capsys)
    assert [b["kind"] for b in cfg["blocks"]] == (
        ["mamba2", "moe", "attention", "moe"] + ["mamba2", "moe"] * 2)
    moe = cfg["blocks"][1]
    assert moe["routing"] == "top1_softmax" and moe["renormalize"] and moe["top_k"] == 2
    assert moe["gated"] and moe["act"] == "silu" and moe["d_ff"] == 32
    assert moe["shared"] == {"d_ff": 40, "gate": None} and moe["residual_scale"] == 0.6
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    src, _ = safetensors_io.load_file(MOE / "hf" / "model.safetensors")
    s = "model.layers.0."
    both = src[s + "block_sparse_moe.input_linear.weight"]
    assert torch.equal(t["blocks.1.moe.gate.weight"], both[:, :32])
    assert torch.equal(t["blocks.1.moe.up.weight"], both[:, 32:])
    assert torch.equal(t["blocks.1.moe.shared.gate.weight"],
                       src[s + "shared_mlp.input_linear.weight"][:40])
    assert t["blocks.1.moe.router.weight"].dtype == torch.float32


def test_the_residual_scale_covers_experts_and_shared_mlp(tmp_path, capsys):
    """residual_multiplier scales the moe block's whole addition: without it
    the reference leaves transformers."""
    out = tmp_path / "out"
    cfg = convert(MOE / "hf", out, capsys, "--sinks", "4", "--window", "252")
    for b in cfg["blocks"]:
        if b["kind"] == "moe":
            b["residual_scale"] = 1.0
    (out / "config.json").write_text(json.dumps(cfg))
    assert (reference_logits(out, MOE) - golden_logits(MOE)).abs().max() > 1e-2


BAD_MOE_CONFIGS = {
    "top_k": (lambda c: c.update(num_experts_per_tok=7),
              ["num_experts_per_tok", "7", "num_local_experts 6"]),
    "top_k_zero": (lambda c: c.update(num_experts_per_tok=0), ["num_experts_per_tok"]),
    "expert_width": (lambda c: c.update(intermediate_size=30),
                     ["block_sparse_moe", "[6, 64, 64]", "[6, 60, 64]"]),
}


test_bad_moe_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, MOE / "hf", edit_config, BAD_MOE_CONFIGS)


M0 = "model.layers.0.block_sparse_moe."
BAD_MOE_TENSORS = {
    "missing_router": (lambda t: t.pop(M0 + "router.layer.weight"), [M0 + "router.layer.weight"]),
    "expert_count": (lambda t: t.update({M0 + "output_linear.weight": torch.zeros(5, 64, 32)}),
                     [M0 + "output_linear.weight", "[5, 64, 32]", "[6, 64, 32]"]),
}


test_bad_moe_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, MOE / "hf", edit_tensors, BAD_MOE_TENSORS)

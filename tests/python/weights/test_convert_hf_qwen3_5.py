"""hf-qwen3_5 and hf-qwen3-next on the golden checkpoints transformers 5.23 wrote
(tests/data/hf_golden): the float64 reference on the converted directory gives
transformers' logits, bf16 keeps the norms and the GDN recurrence in fp32, and
every checkpoint it cannot serve is refused naming the field or tensor, with
nothing left behind. The engine's side is tests/python/parity/test_hf_golden_parity.py."""

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

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden"
SOURCE = "hf-qwen3_5"


def copy(name, tmp_path):
    return pathlib.Path(shutil.copytree(GOLDEN / name / "hf", tmp_path / "hf"))


@pytest.mark.parametrize("name", ["qwen3_5", "qwen3_5_causal", "qwen3_5_moe", "qwen3_next"])
def test_reference_on_the_conversion_gives_transformers_logits(name, tmp_path, capsys):
    out = tmp_path / "out"
    source = "hf-qwen3-next" if name == "qwen3_next" else SOURCE
    code, err = run(["--source", source, str(GOLDEN / name / "hf"), str(out),
                     "--byte-tokenizer", "--sinks", "4", "--window", "252"], capsys)
    assert code == 0, err
    golden = json.loads((GOLDEN / name / "golden.json").read_text())
    want = torch.from_numpy(np.load(GOLDEN / name / "logits.npy")).double()
    got = ReferenceModel.load(out, torch.float64).forward(golden["prompt"])
    # transformers ran in fp32: its own rounding is most of the difference
    # (1e-4 on the MoE model, whose logits reach 30).
    assert (got - want).abs().max() <= 5e-4, (got - want).abs().max()


def test_bf16_keeps_norms_and_recurrence_fp32(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(["--source", SOURCE, str(GOLDEN / "qwen3_5" / "hf"), str(out),
                     "--byte-tokenizer", "--dtype", "bf16"], capsys)
    assert code == 0, err
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert t["blocks.0.in_qkv.weight"].dtype == torch.bfloat16
    for name in ("blocks.0.norm.weight", "blocks.0.A", "blocks.0.dt_bias",
                 "blocks.6.attn.q_norm.weight", "final_norm.weight"):
        assert t[name].dtype == torch.float32, name
    cfg = json.loads((out / "config.json").read_text())
    assert [b["kind"] for b in cfg["blocks"]] == ["gdn", "mlp"] * 3 + ["attention", "mlp"]
    # The default window (8188) shortened to max_position_embeddings 512 - 1 - 4 sinks.
    assert cfg["blocks"][6]["window"] == 507 and cfg["tie_embeddings"] is True


def _text(cfg):
    return cfg["text_config"]


BAD_CONFIGS = {
    "architecture": (lambda c: c.update(model_type="qwen3_next"), ["model_type='qwen3_next'"]),
    "rope_type": (lambda c: _text(c)["rope_parameters"].update(rope_type="yarn"),
                  ["rope_type", "yarn"]),
    "rotary": (lambda c: _text(c)["rope_parameters"].update(partial_rotary_factor=0.01),
               ["partial_rotary_factor"]),
    "layer_types": (lambda c: _text(c).update(layer_types=["linear_attention"] * 3),
                    ["layer_types", "4 layers"]),
    "layer_kind": (lambda c: _text(c).update(layer_types=["linear_attention"] * 3 + ["mamba"]),
                   ["layer_types"]),
    "value_heads": (lambda c: _text(c).update(linear_num_value_heads=3),
                    ["linear_num_value_heads"]),
    "activation": (lambda c: _text(c).update(hidden_act="gelu"), ["hidden_act"]),
    "text_config": (lambda c: c.update(text_config=[]), ["text_config"]),
}


test_bad_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "qwen3_5" / "hf", edit_config, BAD_CONFIGS)


L3 = "model.language_model.layers.3.self_attn."
BAD_TENSORS = {
    "missing_gate_rows": (lambda t: t.update({L3 + "q_proj.weight": t[L3 + "q_proj.weight"][:64]}),
                          [L3 + "q_proj.weight", "[64, 64]"]),
    "missing_q_norm": (lambda t: t.pop(L3 + "q_norm.weight"), [L3 + "q_norm.weight"]),
    "unknown": (lambda t: t.update({"model.language_model.layers.0.linear_attn.extra":
                                    torch.zeros(2)}), ["unknown tensor", "linear_attn.extra"]),
    "conv_shape": (lambda t: t.update({"model.language_model.layers.0.linear_attn.conv1d.weight":
                                       torch.zeros(112, 1, 3)}), ["conv1d.weight"]),
}


test_bad_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "qwen3_5" / "hf", edit_tensors, BAD_TENSORS)


def _fuse_experts(t):
    """The MoE checkpoint's per-expert tensors as transformers 5 holds them in
    memory: experts.gate_up_proj [X, 2F, D] (gate rows first), experts.down_proj."""
    for j in range(4):
        p = f"model.layers.{j}.mlp.experts."
        X = len({n for n in t if n.startswith(p) and n.endswith(".up_proj.weight")})
        stack = {n: torch.stack([t.pop(f"{p}{e}.{n}_proj.weight") for e in range(X)])
                 for n in ("gate", "up", "down")}
        t[p + "gate_up_proj"] = torch.cat([stack["gate"], stack["up"]], dim=1)
        t[p + "down_proj"] = stack["down"]


def test_fused_experts_convert_like_per_expert_ones(tmp_path, capsys):
    src = copy("qwen3_5_moe", tmp_path)
    edit_tensors(src, _fuse_experts)
    fused, per_expert = tmp_path / "fused", tmp_path / "per_expert"
    for s, out in ((src, fused), (GOLDEN / "qwen3_5_moe" / "hf", per_expert)):
        code, err = run(["--source", SOURCE, str(s), str(out), "--byte-tokenizer"], capsys)
        assert code == 0, err
    a, _ = safetensors_io.load_file(fused / "model.safetensors")
    b, _ = safetensors_io.load_file(per_expert / "model.safetensors")
    assert sorted(a) == sorted(b) and "blocks.1.moe.gate.weight" in a
    for n in a:
        assert torch.equal(a[n], b[n]), n
    cfg = json.loads((fused / "config.json").read_text())
    assert cfg["blocks"][1]["shared"] == {"d_ff": 40, "gate": "sigmoid"}
    assert cfg["blocks"][1]["top_k"] == 2 and cfg["blocks"][1]["renormalize"] is True


def test_qwen3_next_layers_follow_mlp_only_layers_and_norm_topk_prob(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(["--source", "hf-qwen3-next", str(GOLDEN / "qwen3_next" / "hf"), str(out),
                     "--byte-tokenizer"], capsys)
    assert code == 0, err
    blocks = json.loads((out / "config.json").read_text())["blocks"]
    assert [b["kind"] for b in blocks] == ["gdn", "moe", "gdn", "mlp", "gdn", "moe",
                                          "attention", "moe"]
    assert blocks[1]["renormalize"] is False and blocks[1]["top_k"] == 2


@pytest.mark.parametrize("source,name", [("hf-qwen3-next", "qwen3_5_causal"),
                                         ("hf-qwen3_5", "qwen3_next")])
def test_each_source_refuses_the_other_family(source, name, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(["--source", source, str(GOLDEN / name / "hf"), str(out),
                     "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "unknown architecture")


def test_qwen3_next_bad_mlp_only_layers_is_refused_by_name(tmp_path, capsys):
    src = copy("qwen3_next", tmp_path)
    edit_config(src, lambda c: c.update(mlp_only_layers="1"))
    out = tmp_path / "out"
    code, err = run(["--source", "hf-qwen3-next", str(src), str(out), "--byte-tokenizer"],
                    capsys)
    assert_clean_failure(out, code, err, "mlp_only_layers")

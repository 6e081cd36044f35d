"""hf-falcon-h1 on the golden checkpoints transformers 5.23 wrote
(tests/data/hf_golden/falcon_h1*): the float64 reference on the converted
directory gives transformers' logits (every µP multiplier folded, both gate
variants), bf16 keeps A, D and dt_bias fp32, and every checkpoint it cannot
serve is refused naming the field or tensor, with nothing left behind. The
engine's side is tests/python/parity/test_hf_golden_parity.py."""

import json
import pathlib
import shutil

import numpy as np
import pytest
import torch

from weights import safetensors_io
from weights.reference.model import ReferenceModel

import converter_cases
from convert_cli import edit_config, edit_tensors, run

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden"
SOURCE = "hf-falcon-h1"


def copy(name, tmp_path):
    return pathlib.Path(shutil.copytree(GOLDEN / name / "hf", tmp_path / "hf"))


def convert(src, out, capsys, *extra):
    return run(["--source", SOURCE, str(src), str(out), "--byte-tokenizer", "--sinks", "4",
                "--window", "252", *extra], capsys)


@pytest.mark.parametrize("name", ["falcon_h1", "falcon_h1_gate_first", "falcon_h1_nonorm"])
def test_reference_on_the_conversion_gives_transformers_logits(name, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = convert(GOLDEN / name / "hf", out, capsys)
    assert code == 0, err
    golden = json.loads((GOLDEN / name / "golden.json").read_text())
    want = torch.from_numpy(np.load(GOLDEN / name / "logits.npy")).double()
    got = ReferenceModel.load(out, torch.float64).forward(golden["prompt"])
    # transformers ran in fp32 (logits up to about 20): about 1e-5 is its rounding.
    assert (got - want).abs().max() <= 1e-4, (got - want).abs().max()


def test_a_multiplier_left_out_shows(tmp_path, capsys):
    """The golden comparison can fail: the same checkpoint with one multiplier
    reset to 1 in its config converts to a model far from transformers'."""
    src = copy("falcon_h1", tmp_path)
    edit_config(src, lambda c: c.update(key_multiplier=1.0))
    out = tmp_path / "out"
    code, err = convert(src, out, capsys)
    assert code == 0, err
    golden = json.loads((GOLDEN / "falcon_h1" / "golden.json").read_text())
    want = torch.from_numpy(np.load(GOLDEN / "falcon_h1" / "logits.npy")).double()
    got = ReferenceModel.load(out, torch.float64).forward(golden["prompt"])
    assert (got - want).abs().max() > 1e-2


def test_layout_multipliers_and_bf16(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = convert(GOLDEN / "falcon_h1" / "hf", out, capsys, "--dtype", "bf16")
    assert code == 0, err
    cfg = json.loads((out / "config.json").read_text())
    assert [b["kind"] for b in cfg["blocks"]] == ["parallel_mamba2_attention", "mlp"] * 3
    assert cfg["embed"]["scale"] == 5.657 and cfg["logit_scale"] == 0.0391
    assert cfg["blocks"][0]["mamba2"]["gate"] == "norm_before_gate"
    # head_dim 24 from config.json, not hidden_size / heads = 16; E = mamba_d_ssm.
    assert cfg["blocks"][0]["attention"]["head_dim"] == 24
    assert cfg["blocks"][0]["mamba2"]["n_heads"] * cfg["blocks"][0]["mamba2"]["head_dim"] == 96
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert t["blocks.0.mamba.in_proj.weight"].dtype == torch.bfloat16
    for name in ("blocks.0.mamba.A", "blocks.0.mamba.D", "blocks.0.mamba.dt_bias"):
        assert t[name].dtype == torch.float32, name
    # The dt rows carry ssm_in x the fifth ssm multiplier (and nothing else).
    src, _ = safetensors_io.load_file(GOLDEN / "falcon_h1" / "hf" / "model.safetensors")
    w = src["model.layers.0.mamba.in_proj.weight"]
    assert torch.allclose(t["blocks.0.mamba.in_proj.weight"][-4:].float(),
                          (w[-4:] * (1.25 * 0.354)).bfloat16().float())


@pytest.mark.parametrize("name, gate", [("falcon_h1", "norm_before_gate"),
                                        ("falcon_h1_gate_first", "norm_after_gate"),
                                        ("falcon_h1_nonorm", "silu")])
def test_gate_follows_mamba_rms_norm_and_norm_before_gate(name, gate, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = convert(GOLDEN / name / "hf", out, capsys)
    assert code == 0, err
    cfg = json.loads((out / "config.json").read_text())
    assert [b["mamba2"]["gate"] for b in cfg["blocks"][::2]] == [gate] * 3


def test_no_gated_norm_writes_no_norm_weight(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = convert(GOLDEN / "falcon_h1_nonorm" / "hf", out, capsys)
    assert code == 0, err
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["blocks"][0]["mamba2"]["gate"] == "silu"
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert "blocks.0.mamba.gated_norm.weight" not in t
    assert "blocks.0.mamba.out_proj.bias" in t and "blocks.0.attn.k.bias" in t


BAD_CONFIGS = {
    "architecture": (lambda c: c.update(model_type="bamba"), ["model_type='bamba'"]),
    "activation": (lambda c: c.update(hidden_act="gelu"), ["hidden_act"]),
    "rope_type": (lambda c: c["rope_parameters"].update(rope_type="yarn"), ["rope_type", "yarn"]),
    "partial_rotary": (lambda c: c["rope_parameters"].update(partial_rotary_factor=0.5),
                       ["partial_rotary_factor"]),
    "mamba_width": (lambda c: c.update(mamba_d_head=20), ["mamba_d_head", "96"]),
    "d_ssm_default": (lambda c: c.pop("mamba_d_ssm"), ["mamba_d_head", "1024"]),
    "groups": (lambda c: c.update(mamba_n_groups=3), ["mamba_n_groups"]),
    "ssm_multipliers": (lambda c: c.update(ssm_multipliers=[1.0, 1.0]), ["ssm_multipliers"]),
    "mlp_multipliers": (lambda c: c.update(mlp_multipliers=[1.0, "x"]), ["mlp_multipliers"]),
    "key_multiplier": (lambda c: c.update(key_multiplier="big"), ["key_multiplier"]),
    "lm_head_multiplier": (lambda c: c.update(lm_head_multiplier=-1.0), ["lm_head_multiplier"]),
}


test_bad_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "falcon_h1" / "hf", edit_config, BAD_CONFIGS)


M0 = "model.layers.0.mamba."
BAD_TENSORS = {
    "missing_norm": (lambda t: t.pop(M0 + "norm.weight"), [M0 + "norm.weight"]),
    "in_proj_rows": (lambda t: t.update({M0 + "in_proj.weight": t[M0 + "in_proj.weight"][:-1]}),
                     [M0 + "in_proj.weight"]),
    "missing_k": (lambda t: t.pop("model.layers.1.self_attn.k_proj.weight"),
                  ["model.layers.1.self_attn.k_proj.weight"]),
    "unknown": (lambda t: t.update({"model.layers.0.mamba.mup_vector": torch.ones(2)}),
                ["unknown tensor", "mup_vector"]),
}


test_bad_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "falcon_h1" / "hf", edit_tensors, BAD_TENSORS)

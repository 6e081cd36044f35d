"""hf-nemotron-h on the golden checkpoints transformers 5.23 wrote
(tests/data/hf_golden/nemotron_h, its dense layer kinds; nemotron_h_moe and
nemotron_h_moe_latent, its MoE layers): the float64 reference on the converted
directory gives transformers' logits, the layer pattern becomes one block per
layer, the mixer's derived tensors are fp32 under bf16, and every checkpoint it
cannot serve is refused naming the field, layer or tensor, with nothing left
behind. The engine's side is tests/python/parity/test_hf_golden_parity.py."""

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

GOLDENS = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden"
GOLDEN = GOLDENS / "nemotron_h"
MOE = GOLDENS / "nemotron_h_moe"
SOURCE = "hf-nemotron-h"
KINDS = ["mamba2", "mlp", "attention", "mamba2", "mlp", "mamba2", "attention"]


def copy(tmp_path):
    return pathlib.Path(shutil.copytree(GOLDEN / "hf", tmp_path / "hf"))


def convert(src, out, capsys, *extra):
    code, err = run(["--source", SOURCE, str(src), str(out), "--byte-tokenizer", *extra],
                    capsys)
    assert code == 0, err
    return json.loads((out / "config.json").read_text())


def reference_error(out, golden_dir=GOLDEN):
    golden = json.loads((golden_dir / "golden.json").read_text())
    want = torch.from_numpy(np.load(golden_dir / "logits.npy")).double()
    got = ReferenceModel.load(out, torch.float64).forward(golden["prompt"])
    return (got - want).abs().max().item()


def test_reference_on_the_conversion_gives_transformers_logits(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(GOLDEN / "hf", out, capsys, "--sinks", "4", "--window", "252")
    assert [b["kind"] for b in cfg["blocks"]] == KINDS
    assert reference_error(out) <= 1e-4


def test_blocks_carry_nemotron_h_fields(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(GOLDEN / "hf", out, capsys)
    mamba, mlp, attn = cfg["blocks"][0], cfg["blocks"][1], cfg["blocks"][2]
    # E = mamba_num_heads x mamba_head_dim = 96, not expand x hidden = 128.
    assert (mamba["n_heads"], mamba["head_dim"], mamba["n_groups"]) == (8, 12, 2)
    assert mamba["in_proj_bias"] and mamba["out_proj_bias"] and mamba["dt_min"] == 0.001
    assert mlp["act"] == "relu2" and not mlp["gated"] and mlp["bias"]
    assert attn["pos"] == "none" and attn["head_dim"] == 12 and not attn["qkv_bias"]
    # The default window shortened to max_position_embeddings 512 - 1 - 4 sinks.
    assert (attn["sinks"], attn["window"]) == (4, 507)
    assert cfg["tie_embeddings"] is False and cfg["eos_token_id"] == 256


def test_bf16_keeps_the_recurrence_fp32(tmp_path, capsys):
    out = tmp_path / "out"
    convert(GOLDEN / "hf", out, capsys, "--dtype", "bf16")
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert t["blocks.0.in_proj.weight"].dtype == torch.bfloat16
    assert t["blocks.1.mlp.up.weight"].dtype == torch.bfloat16
    for name in ("blocks.0.A", "blocks.0.D", "blocks.0.dt_bias"):
        assert t[name].dtype == torch.float32, name


def test_legacy_pattern_model_prefix_and_mtp_layers_convert_alike(tmp_path, capsys):
    """hybrid_override_pattern instead of layers_block_type, tensors under
    transformers' module names (model.) and an MTP layer transformers drops."""
    src = copy(tmp_path)

    def legacy(c):
        c["hybrid_override_pattern"] = "M-*M-M*"
        del c["layers_block_type"]
    edit_config(src, legacy)

    def rename(t):
        for n in [n for n in t if n.startswith("backbone.")]:
            t["model." + n[len("backbone."):]] = t.pop(n)
        t["mtp.layers.0.mixer.q_proj.weight"] = torch.zeros(4, 4)
    edit_tensors(src, rename)
    out = tmp_path / "out"
    cfg = convert(src, out, capsys, "--sinks", "4", "--window", "252")
    assert [b["kind"] for b in cfg["blocks"]] == KINDS
    assert reference_error(out) <= 1e-4


def test_an_explicit_window_is_not_bounded_without_positions(tmp_path, capsys):
    cfg = convert(GOLDEN / "hf", tmp_path / "out", capsys, "--window", "4000")
    assert cfg["blocks"][2]["window"] == 4000


BAD_CONFIGS = {
    "architecture": (lambda c: c.update(model_type="nemotron"), ["model_type='nemotron'"]),
    # This golden has MLP biases: a MoE layer's shared expert could not hold them.
    "moe_with_mlp_bias": (lambda c: c["layers_block_type"].__setitem__(1, "moe"),
                          ["mlp_bias", "moe"]),
    "pattern_char": (lambda c: (c.pop("layers_block_type"),
                                c.update(hybrid_override_pattern="M-x")),
                     ["hybrid_override_pattern"]),
    "layer_kind": (lambda c: c["layers_block_type"].__setitem__(0, "sliding_attention"),
                   ["layers_block_type[0]", "sliding_attention"]),
    "mlp_act": (lambda c: c.update(mlp_hidden_act="swiglu"), ["mlp_hidden_act", "swiglu"]),
    "mamba_act": (lambda c: c.update(mamba_hidden_act="gelu"), ["mamba_hidden_act"]),
    "groups": (lambda c: c.update(n_groups=3), ["n_groups", "mamba_num_heads 8"]),
    "legacy_groups": (lambda c: c.update(mamba_n_groups=3), ["n_groups"]),
    "time_step_min": (lambda c: c.update(time_step_min=-1), ["time_step_min"]),
}


test_bad_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "hf", edit_config, BAD_CONFIGS)


L0 = "backbone.layers.0.mixer."
BAD_TENSORS = {
    # E taken as expand x hidden (128) would give 328 rows.
    "in_proj_rows": (lambda t: t.update({L0 + "in_proj.weight": torch.zeros(328, 64)}),
                     [L0 + "in_proj.weight", "[328, 64]", "[264, 64]"]),
    "missing_mlp_bias": (lambda t: t.pop("backbone.layers.1.mixer.up_proj.bias"),
                         ["backbone.layers.1.mixer.up_proj.bias"]),
    "attention_bias": (lambda t: t.update({"backbone.layers.2.mixer.q_proj.bias":
                                           torch.zeros(48)}),
                       ["unknown tensor", "layers.2.mixer.q_proj.bias"]),
    "missing_head": (lambda t: t.pop("lm_head.weight"), ["lm_head.weight"]),
    "no_embedding": (lambda t: t.pop("backbone.embeddings.weight"),
                     ["backbone.embeddings.weight"]),
}


test_bad_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, GOLDEN / "hf", edit_tensors, BAD_TENSORS)


@pytest.mark.parametrize("name", ["nemotron_h_moe", "nemotron_h_moe_latent"])
def test_moe_layers_give_transformers_logits(name, tmp_path, capsys):
    out = tmp_path / "out"
    cfg = convert(GOLDENS / name / "hf", out, capsys, "--sinks", "4", "--window", "252")
    assert [b["kind"] for b in cfg["blocks"]] == ["mamba2", "moe", "attention", "mamba2",
                                                  "mlp", "moe"]
    assert reference_error(out, GOLDENS / name) <= 1e-4


def test_moe_blocks_carry_the_routing(tmp_path, capsys):
    out = tmp_path / "out"
    moe = convert(MOE / "hf", out, capsys)["blocks"][1]
    assert moe["routing"] == "sigmoid_group_topk" and moe["act"] == "relu2"
    assert (moe["n_experts"], moe["top_k"], moe["n_group"], moe["topk_group"]) == (8, 3, 4, 2)
    assert moe["renormalize"] and moe["routed_scale"] == 2.5 and moe["latent"] is None
    assert not moe["gated"] and moe["d_ff"] == 32 and moe["shared"] == {"d_ff": 40,
                                                                        "gate": None}
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    src, _ = safetensors_io.load_file(MOE / "hf" / "model.safetensors")
    s = "backbone.layers.1.mixer."
    assert torch.equal(t["blocks.1.moe.router.score_bias"], src[s + "gate.e_score_correction_bias"])
    assert torch.equal(t["blocks.1.moe.up.weight"][5], src[s + "experts.5.up_proj.weight"])
    assert torch.equal(t["blocks.1.moe.shared.down.weight"],
                       src[s + "shared_experts.down_proj.weight"])
    latent = convert(GOLDENS / "nemotron_h_moe_latent" / "hf", tmp_path / "l", capsys)
    assert latent["blocks"][1]["latent"] == 24 and not latent["blocks"][1]["renormalize"]


def test_each_routing_setting_matters(tmp_path, capsys):
    """Dropping the score bias, the group limit, the renormalisation or the
    scale moves the reference away from transformers: none is a no-op in the
    golden model."""
    out = tmp_path / "out"
    cfg = convert(MOE / "hf", out, capsys, "--sinks", "4", "--window", "252")
    t, meta = safetensors_io.load_file(out / "model.safetensors")
    edits = {"groups": lambda c: [b.update(topk_group=4) for b in c["blocks"]
                                  if b["kind"] == "moe"],
             "renormalize": lambda c: [b.update(renormalize=False) for b in c["blocks"]
                                       if b["kind"] == "moe"],
             "scale": lambda c: [b.update(routed_scale=1.0) for b in c["blocks"]
                                 if b["kind"] == "moe"]}
    for name, edit in edits.items():
        changed = json.loads(json.dumps(cfg))
        edit(changed)
        (out / "config.json").write_text(json.dumps(changed))
        assert reference_error(out, MOE) > 1e-2, name
    (out / "config.json").write_text(json.dumps(cfg))
    zeroed = dict(t)
    for n in [n for n in t if n.endswith("score_bias")]:
        zeroed[n] = torch.zeros_like(t[n])
    safetensors_io.write_file(zeroed, out / "model.safetensors", meta)
    assert reference_error(out, MOE) > 1e-2, "score_bias"


def test_fused_experts_convert_alike(tmp_path, capsys):
    """transformers 5's module layout: experts.up_proj [X, F, D] and
    experts.down_proj [X, D, F] instead of one tensor per expert."""
    src = pathlib.Path(shutil.copytree(MOE / "hf", tmp_path / "hf"))

    def fuse(t):
        for j in (1, 5):
            s = f"backbone.layers.{j}.mixer.experts."
            for n in ("up", "down"):
                t[s + f"{n}_proj"] = torch.stack([t.pop(s + f"{e}.{n}_proj.weight")
                                                 for e in range(8)])
    edit_tensors(src, fuse)
    out = tmp_path / "out"
    convert(src, out, capsys, "--sinks", "4", "--window", "252")
    assert reference_error(out, MOE) <= 1e-4


def test_bf16_keeps_the_router_and_its_bias_fp32(tmp_path, capsys):
    out = tmp_path / "out"
    convert(MOE / "hf", out, capsys, "--dtype", "bf16")
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert t["blocks.1.moe.up.weight"].dtype == torch.bfloat16
    for name in ("blocks.1.moe.router.weight", "blocks.1.moe.router.score_bias"):
        assert t[name].dtype == torch.float32, name


BAD_MOE_CONFIGS = {
    "n_group_divides": (lambda c: c.update(n_group=3), ["n_group", "3", "n_routed_experts 8"]),
    "group_of_one": (lambda c: c.update(n_group=8, topk_group=4),
                     ["n_group", "at least two"]),
    "topk_group": (lambda c: c.update(topk_group=5), ["topk_group", "5", "n_group 4"]),
    "top_k_reach": (lambda c: c.update(topk_group=1), ["num_experts_per_tok", "3"]),
    "scale": (lambda c: c.update(routed_scaling_factor=0), ["routed_scaling_factor"]),
    "latent": (lambda c: c.update(moe_latent_size=-2), ["moe_latent_size"]),
    "mlp_bias": (lambda c: c.update(mlp_bias=True), ["mlp_bias", "moe"]),
}


test_bad_moe_config_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, MOE / "hf", edit_config, BAD_MOE_CONFIGS)


M1 = "backbone.layers.1.mixer."
BAD_MOE_TENSORS = {
    "missing_score_bias": (lambda t: t.pop(M1 + "gate.e_score_correction_bias"),
                           [M1 + "gate.e_score_correction_bias"]),
    "expert_rows": (lambda t: t.update({M1 + "experts.2.up_proj.weight": torch.zeros(30, 64)}),
                    [M1 + "experts.2.up_proj.weight", "[30, 64]"]),
    "missing_shared": (lambda t: t.pop(M1 + "shared_experts.up_proj.weight"),
                       [M1 + "shared_experts.up_proj.weight"]),
    "latent_unasked": (lambda t: t.update({M1 + "fc1_latent_proj.weight": torch.zeros(24, 64)}),
                       ["unknown tensor", M1 + "fc1_latent_proj.weight"]),
}


test_bad_moe_tensor_is_refused_by_name = converter_cases.edited_golden_test(
    SOURCE, MOE / "hf", edit_tensors, BAD_MOE_TENSORS)

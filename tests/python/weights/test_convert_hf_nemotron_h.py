"""hf-nemotron-h on the golden checkpoint transformers 5.23 wrote
(tests/data/hf_golden/nemotron_h): the float64 reference on the converted
directory gives transformers' logits, the layer pattern becomes one block per
layer, the mixer's derived tensors are fp32 under bf16, and every checkpoint it
cannot serve is refused naming the field, layer or tensor, with nothing left
behind. The engine's side is tests/python/parity/test_hf_golden_parity.py."""

import json
import pathlib
import shutil

import numpy as np
import torch

from weights import safetensors_io
from weights.reference.model import ReferenceModel

import converter_cases
from convert_cli import edit_config, edit_tensors, run

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden" / "nemotron_h"
SOURCE = "hf-nemotron-h"
KINDS = ["mamba2", "mlp", "attention", "mamba2", "mlp", "mamba2", "attention"]


def copy(tmp_path):
    return pathlib.Path(shutil.copytree(GOLDEN / "hf", tmp_path / "hf"))


def convert(src, out, capsys, *extra):
    code, err = run(["--source", SOURCE, str(src), str(out), "--byte-tokenizer", *extra],
                    capsys)
    assert code == 0, err
    return json.loads((out / "config.json").read_text())


def reference_error(out):
    golden = json.loads((GOLDEN / "golden.json").read_text())
    want = torch.from_numpy(np.load(GOLDEN / "logits.npy")).double()
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
    "moe_layer": (lambda c: c["layers_block_type"].__setitem__(1, "moe"),
                  ["layers_block_type[1]", "moe", "shared expert"]),
    "moe_pattern": (lambda c: (c.pop("layers_block_type"),
                               c.update(hybrid_override_pattern="M-*ME")),
                    ["hybrid_override_pattern[4]", "moe"]),
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

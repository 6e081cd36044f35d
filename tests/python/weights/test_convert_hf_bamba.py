"""`--source hf-bamba`: HF Bamba checkpoints -> canonical mamba2 / attention + mlp blocks.

The converted directory, run by the float64 reference with a cache that never
evicts, must give transformers' own float64 forward (n_groups = 1: transformers
4.48.3 is wrong for more, MODELS.md 7.13); every save_pretrained layout
converts alike; every bad input is an error that names its culprit, exits 1
and leaves no output behind.
"""


import pytest
import torch

from weights import safetensors_io

import converter_cases as cases
import hf_layouts
import hf_models
from convert_cli import assert_clean_failure, edit_config, run

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import BambaConfig, BambaForCausalLM  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85]
# Layers 0..3: mamba, attention, mamba, attention; an MLP after each.
KINDS = ["mamba2", "mlp", "attention", "mlp"] * 2


def make_model(seed=0, tied=False, **over):
    """A small Bamba: Mamba-2 head_dim 12 and d_state 20 (neither 64 nor a power
    of two), chunk_size 16 below the prompt length; attention head_dim 16, of
    which BambaConfig's partial_rotary_factor 0.5 rotates 8."""
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=48, intermediate_size=80, num_hidden_layers=4,
              num_attention_heads=3, num_key_value_heads=1, attn_layer_indices=[1, 3],
              mamba_n_heads=8, mamba_d_head="auto", mamba_n_groups=1, mamba_d_state=20,
              mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, mamba_conv_bias=True,
              mamba_proj_bias=False, rms_norm_eps=1e-5, max_position_embeddings=512,
              tie_word_embeddings=tied, initializer_range=0.1, pad_token_id=None,
              bos_token_id=None, eos_token_id=256)
    kw.update(over)
    model = BambaForCausalLM(BambaConfig(**kw)).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", "layernorm.weight", "mamba.D", ".bias"), 0.2)
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64; its RoPE table is computed in fp32
    whatever the dtype (~1e-6 on the logits), hence the 1e-5 tolerance below."""
    with torch.no_grad():
        return model.double()(torch.tensor([tokens])).logits[0]


def convert_ok(src, out, capsys, *extra):
    conf, err = cases.convert_ok("hf-bamba", src, out, capsys, *extra)
    assert "warning" not in err
    return conf


@pytest.mark.parametrize("tied,bias", [(False, False), (True, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, tied, bias):
    # bias: BambaConfig hard-codes attention_bias and mlp_bias false before its
    # base class reads config.json, so a file that sets them wins; the Mamba
    # projections' own bias is mamba_proj_bias.
    model = make_model(seed=1, tied=tied, attention_bias=bias, mlp_bias=bias,
                       mamba_proj_bias=bias)
    assert (model.model.layers[1].self_attn.q_proj.bias is not None) == bias
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf = convert_ok(src, out, capsys, "--sinks", "2", "--window", "40")
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS, min_std=0.5)

    assert [b["kind"] for b in conf["blocks"]] == KINDS
    norm = {"type": "rmsnorm", "eps": 1e-5}
    m, f, a = conf["blocks"][0], conf["blocks"][1], conf["blocks"][2]
    assert m == {"kind": "mamba2", "norm": norm, "n_heads": 8, "head_dim": 12, "d_state": 20,
                 "n_groups": 1, "d_conv": 4, "in_proj_bias": bias, "out_proj_bias": bias,
                 "conv_bias": True, "dt_min": 0.0, "dt_max": None, "gated_norm_eps": 1e-5}
    assert a == {"kind": "attention", "norm": norm, "n_heads": 3, "n_kv_heads": 1,
                 "head_dim": 16, "qkv_bias": bias, "o_bias": bias, "pos": "rope_half",
                 "rope_theta": 10000.0, "rope_scaling": None, "rotary_dim": 8, "sinks": 2,
                 "window": 40, "rel_bias": None}
    assert f == {"kind": "mlp", "norm": norm, "d_ff": 80, "act": "silu", "gated": True,
                 "bias": bias}
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256
    assert conf["final_norm"] == dict(norm, affine=True)

    t = cases.written_tensors(out, "hf-bamba", tied)
    sd = model.state_dict()
    # The attention weights stay in the checkpoint's layout.
    assert torch.equal(t["blocks.2.attn.q.weight"].double(),
                       sd["model.layers.1.self_attn.q_proj.weight"])
    assert torch.equal(t["blocks.4.gated_norm.weight"].double(),
                       sd["model.layers.2.mamba.norm.weight"])
    assert torch.equal(t["blocks.4.A"].double(),
                       -torch.exp(sd["model.layers.2.mamba.A_log"].float()).double())
    assert torch.equal(t["blocks.7.norm.weight"].double(),
                       sd["model.layers.3.pre_ff_layernorm.weight"])
    assert torch.equal(t["blocks.5.mlp.up.weight"].double(),
                       sd["model.layers.2.feed_forward.up_proj.weight"])


def test_rope_fields_from_config_json_override_the_class(tmp_path, capsys):
    # A quarter of head_dim 16 rotated at θ 5e5 under yarn, whose attention
    # factor transformers applies to the rotated channels only.
    model = make_model(seed=2, partial_rotary_factor=0.25, rope_theta=500000.0,
                       rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert model.model.rotary_emb.inv_freq.shape == (2,)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf = convert_ok(src, out, capsys)
    a = conf["blocks"][2]
    assert (a["rotary_dim"], a["rope_theta"], a["rope_scaling"]["type"]) == (4, 500000.0, "yarn")
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS)


def test_no_attention_layers_and_grouped_mixer(tmp_path, capsys):
    # attn_layer_indices null: every mixer is Mamba-2. Four B/C groups convert
    # as the checkpoint's mamba_ssm code runs them (the engine's mamba2 block).
    model = make_model(seed=3, attn_layer_indices=None, num_hidden_layers=2, mamba_n_groups=4)
    src = hf_layouts.save(model, tmp_path / "hf")
    conf = convert_ok(src, tmp_path / "out", capsys)
    assert [b["kind"] for b in conf["blocks"]] == ["mamba2", "mlp"] * 2
    assert conf["blocks"][0]["n_groups"] == 4
    t, _ = safetensors_io.load_file(tmp_path / "out" / "model.safetensors")
    assert tuple(t["blocks.2.conv.weight"].shape) == (96 + 2 * 4 * 20, 4)


def test_default_cache_size_and_tokenizer_copy(tmp_path, capsys):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    conf = cases.convert_with_tokenizer("hf-bamba", src, tmp_path / "out", capsys)
    # 4 + 4092 keys exceed the 512 trained positions: the window shrinks to 507.
    assert (conf["blocks"][2]["sinks"], conf["blocks"][2]["window"]) == (4, 507)

    big = hf_layouts.save(make_model(max_position_embeddings=262144), tmp_path / "hf_big")
    conf = convert_ok(big, tmp_path / "out2", capsys)
    assert (conf["blocks"][6]["sinks"], conf["blocks"][6]["window"]) == (4, 4092)

    # A query sits at cache position S + W, which must be a trained position.
    code, err = run(["--source", "hf-bamba", str(src), str(tmp_path / "out3"),
                     "--byte-tokenizer", "--window", "508"], capsys)
    assert_clean_failure(tmp_path / "out3", code, err, "--window 508",
                         "max_position_embeddings 512")


test_every_save_pretrained_layout_converts_alike = cases.layouts_test(
    "hf-bamba", lambda: make_model(seed=4))
test_truncated_pytorch_bin = cases.truncated_bin_test("hf-bamba", make_model)


def test_dtype_option_and_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(seed=5), tmp_path / "hf")
    cases.assert_bf16_conversion(
        "hf-bamba", src, tmp_path / "bf16", "2 mamba2, 4 mlp, 2 attention blocks",
        ("blocks.0.in_proj.weight", "blocks.0.gated_norm.weight", "blocks.2.attn.k.weight",
         "blocks.3.mlp.gate.weight", "embed.weight", "lm_head.weight"),
        ("blocks.0.A", "blocks.0.D", "blocks.0.dt_bias"))


_cfg = cases.config_case

CORRUPT = {
    "missing_tensor": cases.missing_tensor("model.layers.2.mamba.dt_bias"),
    "missing_mlp_in_mamba_layer": cases.missing_tensor(
        "model.layers.0.feed_forward.up_proj.weight"),
    "missing_attention": cases.missing_tensor("model.layers.3.self_attn.k_proj.weight"),
    "wrong_shape": cases.wrong_shape("model.layers.1.self_attn.q_proj.weight", (47, 48),
                                     (48, 48)),
    "mamba_tensor_in_attention_layer": cases.unknown_tensor("model.layers.1.mamba.D",
                                                            torch.ones(8)),
    "lm_head_missing": cases.LM_HEAD_MISSING,
    "integer_tensor": cases.integer_tensor("model.layers.0.mamba.A_log", 8),
    "unknown_architecture": _cfg(["unknown architecture", "'jamba'"], model_type="jamba",
                                 architectures=["JambaForCausalLM"]),
    "activation": cases.ACTIVATION,
    "attention_bias_missing": _cfg(["missing tensor", "model.layers.1.self_attn.k_proj.bias"],
                                   attention_bias=True),
    "mlp_bias_missing": _cfg(["missing tensor", "model.layers.0.feed_forward.down_proj.bias"],
                             mlp_bias=True),
    "attention_index_out_of_range": _cfg(
        ["attn_layer_indices", "[1, 4]", "num_hidden_layers 4"], attn_layer_indices=[1, 4]),
    "attention_index_repeated": _cfg(["attn_layer_indices"], attn_layer_indices=[1, 1, 3]),
    "attention_layer_moved": _cfg(["missing tensor", "model.layers.0.self_attn"],
                                  attn_layer_indices=[0, 3]),
    "odd_rotary_dim": _cfg(["partial_rotary_factor", "int(16 x 0.3125) = 5"],
                           partial_rotary_factor=0.3125),
    "rotary_beyond_head": _cfg(["partial_rotary_factor", "= 24", "head_dim 16"],
                               partial_rotary_factor=1.5),
    "rope_type": _cfg(["rope_scaling", "longrope"],
                      rope_scaling={"rope_type": "longrope", "factor": 2.0}),
    "mamba_heads": _cfg(["mamba_n_heads", "96"], mamba_d_head=10),
    "mamba_groups": _cfg(["mamba_n_groups", "mamba_n_heads 8"], mamba_n_groups=3),
    "mamba_expand": _cfg(["mamba_expand"], mamba_expand=1.5),
    "class_default_state": (lambda s: edit_config(s, lambda c: c.pop("mamba_d_state")),
                            ["model.layers.0.mamba.conv1d.bias", "[136]", "[608]"]),
    "head_grouping": _cfg(["num_key_value_heads"], num_key_value_heads=2),
    **hf_layouts.BROKEN_FILES,
}


test_bad_checkpoint_is_a_clean_error = cases.bad_checkpoint_test("hf-bamba", make_model, CORRUPT)
test_bad_cache_size = cases.bad_cache_size_test("hf-bamba", make_model)

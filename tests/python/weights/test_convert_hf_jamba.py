"""`--source hf-jamba`: HF Jamba checkpoints -> canonical mamba1 / attention + mlp / moe blocks.

The converted directory, run by the float64 reference with a cache that never
evicts, must give transformers' own float64 forward; every bad input is an
error that names its culprit, exits 1 and leaves no output behind.
"""


import pytest
import torch

from weights.reference.model import ReferenceModel

import converter_cases as cases
import hf_layouts
import hf_models
from convert_cli import edit_config, run_process

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import JambaConfig, JambaForCausalLM  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78]
# Layers 0..5: mamba+mlp, attention+moe, mamba+mlp, mamba+moe, attention+mlp, mamba+moe.
KINDS = ["mamba1", "mlp", "attention", "moe", "mamba1", "mlp",
         "mamba1", "moe", "attention", "mlp", "mamba1", "moe"]


def make_model(seed=0, tied=False, proj_bias=False, **over):
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=32, intermediate_size=40, num_hidden_layers=6,
              num_attention_heads=4, num_key_value_heads=2, num_experts=4,
              num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
              attn_layer_period=3, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4,
              mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True,
              mamba_proj_bias=proj_bias, rms_norm_eps=1e-5, tie_word_embeddings=tied,
              use_mamba_kernels=False, initializer_range=0.15, pad_token_id=None,
              bos_token_id=None, eos_token_id=256)
    kw.update(over)
    model = JambaForCausalLM(JambaConfig(**kw)).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", "mamba.D", ".bias"), 0.2)
    # Decisive routing: no near-ties between expert choices.
    hf_models.scale(model, ("router.weight",), 10.0)
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64. Its Mamba mixer still rounds A, B and the
    scan input to fp32 and its router softmax runs in fp32 (~1e-6 on the
    logits); hence the 1e-5 tolerance below."""
    with torch.no_grad():
        return model.double()(torch.tensor([tokens])).logits[0]


@pytest.mark.parametrize("tied,proj_bias", [(False, False), (True, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, tied, proj_bias):
    model = make_model(seed=1, tied=tied, proj_bias=proj_bias)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf, _ = cases.convert_ok("hf-jamba", src, out, capsys, "--sinks", "2", "--window", "40")
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS, min_std=0.5)

    assert [b["kind"] for b in conf["blocks"]] == KINDS
    norm = {"type": "rmsnorm", "eps": 1e-5}
    m, a, e = conf["blocks"][0], conf["blocks"][2], conf["blocks"][3]
    assert m["norm"] == m["dt_bc_norm"] == a["norm"] == e["norm"] == norm
    assert (m["d_inner"], m["d_state"], m["d_conv"], m["dt_rank"]) == (64, 8, 4, 2)
    assert m["in_proj_bias"] == m["out_proj_bias"] == proj_bias and m["conv_bias"]
    assert (a["n_heads"], a["n_kv_heads"], a["head_dim"], a["pos"]) == (4, 2, 8, "none")
    assert (a["sinks"], a["window"]) == (2, 40)
    assert (e["routing"], e["n_experts"], e["top_k"], e["renormalize"]) == \
        ("top1_softmax", 4, 2, False)
    assert e["gated"] and e["act"] == "silu" and e["d_ff"] == 40
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256
    assert conf["final_norm"] == dict(norm, affine=True)

    t = cases.written_tensors(out, "hf-jamba", tied)
    sd = model.state_dict()
    assert torch.equal(t["blocks.7.moe.gate.weight"][3].double(),
                       sd["model.layers.3.feed_forward.experts.3.gate_proj.weight"])
    assert torch.equal(t["blocks.6.c_norm.weight"].double(),
                       sd["model.layers.3.mamba.c_layernorm.weight"])
    assert torch.equal(t["blocks.9.norm.weight"].double(),
                       sd["model.layers.4.pre_ff_layernorm.weight"])


def test_default_cache_size_and_tokenizer_copy(tmp_path, capsys):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    conf = cases.convert_with_tokenizer("hf-jamba", src, tmp_path / "out", capsys)
    assert (conf["blocks"][2]["sinks"], conf["blocks"][2]["window"]) == (4, 4092)

    # A shorter trained context shortens the default window: S + W + 1 keys <= 256.
    small = hf_layouts.save(make_model(max_position_embeddings=256), tmp_path / "hf_small")
    b = cases.convert_ok("hf-jamba", small, tmp_path / "out2", capsys)[0]["blocks"][2]
    assert (b["sinks"], b["window"]) == (4, 251)


def test_one_expert_means_mlp_blocks_only(tmp_path, capsys):
    model = make_model(seed=3, num_experts=1, attn_layer_period=2, attn_layer_offset=0,
                       num_hidden_layers=2)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf, _ = cases.convert_ok("hf-jamba", src, out, capsys)
    assert [b["kind"] for b in conf["blocks"]] == ["attention", "mlp", "mamba1", "mlp"]
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-5)


test_every_save_pretrained_layout_converts_alike = cases.layouts_test(
    "hf-jamba", lambda: make_model(seed=4))
test_truncated_pytorch_bin = cases.truncated_bin_test("hf-jamba", make_model)


def test_dtype_option_and_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(seed=5), tmp_path / "hf")
    cases.assert_bf16_conversion(
        "hf-jamba", src, tmp_path / "bf16", "4 mamba1, 3 mlp, 2 attention, 3 moe blocks",
        ("blocks.0.in_proj.weight", "blocks.0.dt_norm.weight", "blocks.2.attn.q.weight",
         "blocks.3.moe.up.weight", "embed.weight"),
        ("blocks.0.A", "blocks.0.D", "blocks.0.dt_proj.bias", "blocks.3.moe.router.weight"))

    bad = tmp_path / "bad"
    edit_config(src, lambda c: c.update(hidden_act="gelu"))
    proc = run_process(["--source", "hf-jamba", str(src), str(bad), "--byte-tokenizer"])
    assert proc.returncode == 1 and "hidden_act" in proc.stderr and not bad.exists()


_cfg = cases.config_case

CORRUPT = {
    "missing_tensor": cases.missing_tensor("model.layers.3.mamba.b_layernorm.weight"),
    "missing_expert": cases.missing_tensor(
        "model.layers.5.feed_forward.experts.2.down_proj.weight"),
    "wrong_shape": cases.wrong_shape("model.layers.0.mamba.x_proj.weight", (17, 64), (18, 64)),
    "unknown_tensor": cases.unknown_tensor("model.layers.0.mamba.z_layernorm.weight",
                                           torch.zeros(8)),
    "lm_head_missing": cases.LM_HEAD_MISSING,
    "integer_tensor": cases.integer_tensor("model.layers.1.feed_forward.router.weight", 4, 32),
    "unknown_architecture": _cfg(["unknown architecture", "mixtral"], model_type="mixtral",
                                 architectures=["MixtralForCausalLM"]),
    "proj_bias_missing": _cfg(["missing tensor", "model.layers.0.mamba.in_proj.bias"],
                              mamba_proj_bias=True),
    "activation": cases.ACTIVATION,
    "sliding_window": _cfg(["sliding_window"], sliding_window=64),
    "attn_offset": _cfg(["attn_layer_offset", "attn_layer_period 3"], attn_layer_offset=3),
    "expert_offset": _cfg(["expert_layer_offset", "non-negative integer"],
                          expert_layer_offset=-1),
    "top_k": _cfg(["num_experts_per_tok", "num_experts 4"], num_experts_per_tok=5),
    "head_grouping": _cfg(["num_key_value_heads"], num_key_value_heads=3),
    "head_split": _cfg(["hidden_size", "num_attention_heads 5"], num_attention_heads=5),
    "dt_rank": _cfg(["mamba_dt_rank"], mamba_dt_rank="big"),
    **hf_layouts.BROKEN_FILES,
}

test_bad_checkpoint_is_a_clean_error = cases.bad_checkpoint_test("hf-jamba", make_model, CORRUPT)
test_bad_cache_size = cases.bad_cache_size_test("hf-jamba", make_model)

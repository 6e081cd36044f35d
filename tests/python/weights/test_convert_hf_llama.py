"""`--source hf-llama`: HF Llama / Mistral / Qwen2 checkpoints -> canonical attention + mlp
blocks.

The converted directory, run by the float64 reference with a cache that never
evicts, must give transformers' own float64 forward; every bad input is an
error that names its culprit, exits 1 and leaves no output behind.
"""

import json
import math

import pytest
import torch

from weights import canonical, safetensors_io
from weights.reference.model import ReferenceModel

import converter_cases as cases
import hf_layouts
import hf_models
from convert_cli import assert_clean_failure, edit_config, run, run_process

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig,  # noqa: E402
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from weights.reference.attention import rope_inv_freq  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78]


def make_model(bias=False, tied=False, seed=0, arch="llama", **over):
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
              rope_theta=500000.0, max_position_embeddings=256, attention_bias=bias,
              mlp_bias=bias, tie_word_embeddings=tied, initializer_range=0.2,
              bos_token_id=None, eos_token_id=256)
    if arch != "llama":
        for key in ("attention_bias", "mlp_bias", "head_dim" if arch == "qwen2" else ""):
            kw.pop(key, None)
    kw.update(over)
    config, model_class = {"llama": (LlamaConfig, LlamaForCausalLM),
                           "mistral": (MistralConfig, MistralForCausalLM),
                           "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[arch]
    model = model_class(config(**kw)).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", ".bias"), 0.1)
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64, RoPE frequencies recomputed in float64.

    The rotary module still forms the angles p * theta_i in fp32 (MODELS.md 3.2),
    which moves logits by ~1e-6; hence the 1e-5 tolerance below.
    """
    m = model.double()
    rot = m.model.rotary_emb
    if rot.rope_type == "default":
        d = rot.inv_freq.shape[0] * 2
        rot.inv_freq = 1.0 / (m.config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64)
                                                      / d))
    with torch.no_grad():
        return m(torch.tensor([tokens])).logits[0]


@pytest.mark.parametrize("bias,tied", [(False, False), (True, False), (True, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, bias, tied):
    model = make_model(bias=bias, tied=tied, seed=1)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf, _ = cases.convert_ok("hf-llama", src, out, capsys, "--sinks", "2", "--window", "40")
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS, min_std=0.5)

    assert [b["kind"] for b in conf["blocks"]] == ["attention", "mlp"] * 2
    a, m = conf["blocks"][0], conf["blocks"][1]
    assert (a["n_heads"], a["n_kv_heads"], a["head_dim"]) == (4, 2, 8)
    assert a["pos"] == "rope_half" and a["rope_theta"] == 500000.0 and a["rope_scaling"] is None
    assert (a["sinks"], a["window"]) == (2, 40)
    assert a["qkv_bias"] == a["o_bias"] == bias and m["bias"] == bias
    assert m["gated"] and m["act"] == "silu" and m["d_ff"] == 48
    assert a["norm"] == m["norm"] == {"type": "rmsnorm", "eps": 1e-5}
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256
    t = cases.written_tensors(out, "hf-llama", tied)
    sd = model.state_dict()
    assert torch.equal(t["blocks.3.mlp.gate.weight"].double(),
                       sd["model.layers.1.mlp.gate_proj.weight"])
    assert torch.equal(t["blocks.2.norm.weight"].double(),
                       sd["model.layers.1.input_layernorm.weight"])


ROPE_SCALING = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
    "yarn": {"type": "yarn", "factor": 4.0, "beta_fast": 16.0,
             "original_max_position_embeddings": 256},
    "yarn_attention_factor": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5},
}

CANONICAL_SCALING = {
    "linear": {"type": "linear", "factor": 4.0},
    "dynamic": {"type": "dynamic", "factor": 2.0, "max_position_embeddings": 256},
    "llama3": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
    "yarn": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
             "beta_fast": 16.0, "beta_slow": 1.0, "attention_factor": 0.1 * math.log(4.0) + 1},
    "yarn_attention_factor": {"type": "yarn", "factor": 4.0,
                              "original_max_position_embeddings": 256, "beta_fast": 32.0,
                              "beta_slow": 1.0, "attention_factor": 1.5},
}


@pytest.mark.parametrize("case", sorted(ROPE_SCALING))
def test_rope_scaling_converts_as_transformers_computes_it(tmp_path, capsys, case):
    model = make_model(seed=3, head_dim=16, rope_theta=10000.0,
                       rope_scaling=dict(ROPE_SCALING[case]))
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer",
                     "--sinks", "2", "--window", "40"], capsys)
    assert code == 0, err
    blk = json.loads((out / "config.json").read_text())["blocks"][0]
    assert blk["rope_scaling"] == pytest.approx(CANONICAL_SCALING[case])

    # The reference's formulas (MODELS.md 10) give transformers' frequencies.
    rot = model.model.rotary_emb
    want = ROPE_INIT_FUNCTIONS[rot.rope_type](model.config, None)
    got = rope_inv_freq(16, 10000.0, blk["rope_scaling"], torch.float64, len(TOKENS))
    assert torch.allclose(got[0], want[0].double(), rtol=1e-6, atol=0)
    assert got[1] == pytest.approx(want[1], rel=1e-12)

    # End to end; transformers' frequencies are fp32 here, hence 1e-4.
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-4)


def test_qwen2_converts_with_qkv_biases(tmp_path, capsys):
    model = make_model(seed=5, tied=True, arch="qwen2", use_sliding_window=False,
                       sliding_window=4096, rms_norm_eps=1e-6)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer",
                     "--window", "60"], capsys)
    assert code == 0, err
    a, m = json.loads((out / "config.json").read_text())["blocks"][:2]
    assert (a["qkv_bias"], a["o_bias"], m["bias"]) == (True, False, False)
    assert (a["head_dim"], a["sinks"], a["window"], a["norm"]["eps"]) == (8, 4, 60, 1e-6)
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert "blocks.0.attn.k.bias" in t and "blocks.0.attn.o.bias" not in t
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-5)


def test_mistral_sliding_window_is_the_cache(tmp_path, capsys):
    model = make_model(seed=6, arch="mistral", sliding_window=12)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"], capsys)
    assert code == 0, err
    a = json.loads((out / "config.json").read_text())["blocks"][0]
    assert (a["sinks"], a["window"], a["qkv_bias"], a["o_bias"]) == (0, 11, False, False)
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert len(TOKENS) > 2 * 12
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-5)

    # Sinks are a serving option; a smaller window too, a larger one is refused.
    out2 = tmp_path / "out2"
    assert run(["--source", "hf-llama", str(src), str(out2), "--byte-tokenizer", "--sinks", "4",
                "--window", "8"], capsys)[0] == 0
    a = json.loads((out2 / "config.json").read_text())["blocks"][0]
    assert (a["sinks"], a["window"]) == (4, 8)
    out3 = tmp_path / "out3"
    code, err = run(["--source", "hf-llama", str(src), str(out3), "--byte-tokenizer",
                     "--window", "12"], capsys)
    assert_clean_failure(out3, code, err, "--window 12", "sliding_window 12")


def test_mistral_sliding_window_defaults_to_mistral_config(tmp_path, capsys):
    """A config.json without the field gets MistralConfig's 4096, as transformers does."""
    src = hf_layouts.save(make_model(seed=2, arch="mistral", max_position_embeddings=8192),
                          tmp_path / "hf")
    edit_config(src, lambda c: c.pop("sliding_window"))
    out = tmp_path / "out"
    assert run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"], capsys)[0] == 0
    a = json.loads((out / "config.json").read_text())["blocks"][0]
    assert (a["sinks"], a["window"]) == (0, 4095)


def test_default_cache_size_and_tokenizer_copy(tmp_path, capsys):
    src = hf_layouts.save(make_model(max_position_embeddings=4096), tmp_path / "hf")
    conf = cases.convert_with_tokenizer("hf-llama", src, tmp_path / "out", capsys)
    assert (conf["blocks"][0]["sinks"], conf["blocks"][0]["window"]) == (4, 2044)

    # A shorter trained context shortens the default window: query position S + W < 256.
    small = hf_layouts.save(make_model(), tmp_path / "hf_small")
    out2 = tmp_path / "out2"
    assert run(["--source", "hf-llama", str(small), str(out2), "--byte-tokenizer"], capsys)[0] == 0
    b = json.loads((out2 / "config.json").read_text())["blocks"][0]
    assert (b["sinks"], b["window"]) == (4, 251)


def test_mistral_without_sliding_window(tmp_path, capsys):
    model = make_model(seed=2, arch="mistral", sliding_window=None)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer",
                     "--window", "60"], capsys)
    assert code == 0, err
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-5)


test_every_save_pretrained_layout_converts_alike = cases.layouts_test(
    "hf-llama", lambda: make_model(bias=True, seed=4))
test_truncated_pytorch_bin = cases.truncated_bin_test("hf-llama", make_model)


_cfg = cases.config_case

CORRUPT = {
    "missing_tensor": cases.missing_tensor("model.layers.1.self_attn.k_proj.weight"),
    "wrong_shape": cases.wrong_shape("model.layers.0.mlp.down_proj.weight", (32, 47), (32, 48)),
    "unknown_tensor": cases.unknown_tensor("model.layers.0.self_attn.rotary_emb.inv_freq",
                                           torch.zeros(4), named="rotary_emb.inv_freq"),
    "bias_missing": _cfg(["missing tensor", "model.layers.0.self_attn.k_proj.bias"],
                         attention_bias=True),
    "unknown_architecture": _cfg(["unknown architecture", "gpt_neox"], model_type="gpt_neox",
                                 architectures=["GPTNeoXForCausalLM"]),
    "rope_unknown_type": (lambda s: edit_config(s, lambda c: c.update(rope_scaling={
        "rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]})),
        ["rope_scaling type 'longrope' is not supported", "linear, dynamic, llama3, yarn"]),
    "rope_no_type": (lambda s: edit_config(s, lambda c: c.update(
        rope_scaling={"factor": 2.0})), ["rope_scaling", "names no rope_type"]),
    "rope_types_disagree": (lambda s: edit_config(s, lambda c: c.update(
        rope_scaling={"type": "linear", "rope_type": "dynamic", "factor": 2.0})),
        ["rope_type 'dynamic'", "type 'linear'"]),
    "rope_missing_factor": (lambda s: edit_config(s, lambda c: c.update(
        rope_scaling={"rope_type": "linear"})), ["rope_scaling ('linear')", "missing 'factor'"]),
    "rope_factor_below_one": (lambda s: edit_config(s, lambda c: c.update(
        rope_scaling={"rope_type": "yarn", "factor": 0.5})), ["'factor'", ">= 1", "0.5"]),
    "rope_llama3_missing_key": (lambda s: edit_config(s, lambda c: c.update(rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "original_max_position_embeddings": 64})), ["'llama3'", "missing 'high_freq_factor'"]),
    "rope_llama3_bands": (lambda s: edit_config(s, lambda c: c.update(rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64})), ["high_freq_factor 1", "low_freq_factor 4"]),
    "rope_unread_key": (lambda s: edit_config(s, lambda c: c.update(rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "mscale": 0.707})), ["'yarn'", "['mscale']"]),
    "rope_yarn_lengths_differ": (lambda s: edit_config(s, lambda c: c.update(rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})),
        ["original_max_position_embeddings 64", "max_position_embeddings 256"]),
    "rope_dynamic_no_max_pos": (lambda s: edit_config(s, lambda c: (c.update(rope_scaling={
        "rope_type": "dynamic", "factor": 2.0}), c.pop("max_position_embeddings"))),
        ["'dynamic'", "needs max_position_embeddings"]),
    "rope_not_an_object": (lambda s: edit_config(s, lambda c: c.update(rope_scaling="linear")),
                           ["rope_scaling must be an object"]),
    "sliding_window_on_llama": (lambda s: edit_config(s, lambda c: c.update(sliding_window=64)),
                                ["sliding_window 64", "LlamaForCausalLM"]),
    "mistral_bad_window": (lambda s: edit_config(s, lambda c: c.update(
        model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=0)),
        ["'sliding_window'", "got 0"]),
    "qwen2_sliding_window": (lambda s: edit_config(s, lambda c: c.update(
        model_type="qwen2", architectures=["Qwen2ForCausalLM"], use_sliding_window=True)),
        ["use_sliding_window", "flash_attention_2"]),
    "qwen2_missing_bias": (lambda s: edit_config(s, lambda c: c.update(
        model_type="qwen2", architectures=["Qwen2ForCausalLM"])),
        ["missing tensor", "model.layers.0.self_attn.k_proj.bias"]),
    "activation": cases.ACTIVATION,
    "head_grouping": _cfg(["num_key_value_heads"], num_key_value_heads=3),
    "head_split": (lambda s: edit_config(s, lambda c: c.update(
        num_attention_heads=5, num_key_value_heads=None, head_dim=None)),
        ["hidden_size", "num_attention_heads 5", "head_dim is absent"]),
    **hf_layouts.BROKEN_FILES,
}


test_bad_checkpoint_is_a_clean_error = cases.bad_checkpoint_test("hf-llama", make_model, CORRUPT)
test_bad_cache_size = cases.bad_cache_size_test("hf-llama", make_model, [
    (["--window", "252"], "max_position_embeddings 256"),
    (["--sinks", "-1"], "--sinks"),
    (["--sinks", "0", "--window", "0"], "at least 1"),
])


def test_serving_options_only_for_llama(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(tmp_path), str(out), "--byte-tokenizer",
                     "--sinks", "4"], capsys)
    assert_clean_failure(out, code, err, "--sinks does not apply to --source hf-mamba")


def test_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    edit_config(src, lambda c: c.update(rope_scaling={"rope_type": "su", "factor": 4.0}))
    out = tmp_path / "out"
    proc = run_process(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"])
    assert proc.returncode == 1 and "rope_scaling" in proc.stderr and not out.exists()
    ok = tmp_path / "ok"
    edit_config(src, lambda c: c.update(rope_scaling=None))
    proc = run_process(["--source", "hf-llama", str(src), str(ok), "--byte-tokenizer",
                        "--dtype", "bf16"])
    assert proc.returncode == 0, proc.stderr
    assert "2 attention, 2 mlp blocks" in proc.stdout
    t, _ = safetensors_io.load_file(ok / "model.safetensors")
    assert t["blocks.0.attn.q.weight"].dtype == torch.bfloat16
    canonical.load_model_dir(ok)

"""`--source hf-mamba2`: HF Mamba2ForCausalLM checkpoints -> canonical mamba2 blocks.

The converted directory, run by the float64 reference (weights/reference/mamba2.py),
must give transformers' own float64 forward for n_groups = 1 (transformers 4.48.3
is wrong for n_groups > 1, MODELS.md 7.13; the engine follows mamba_ssm there);
every save_pretrained layout converts alike; every bad input is an error that
names its culprit, exits 1 and leaves no output behind.
"""

import math

import pytest
import torch

from weights import safetensors_io

import converter_cases as cases
import hf_layouts
import hf_models
from convert_cli import edit_config

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import Mamba2Config, Mamba2ForCausalLM  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85]


def make_model(seed=0, tied=False, use_bias=False, **over):
    """A small Mamba-2: head_dim 12 and d_state 20 (neither 64 nor a power of two),
    chunk_size 16 below the prompt length."""
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=48, expand=2, num_heads=8, head_dim=12,
              state_size=20, n_groups=1, num_hidden_layers=3, conv_kernel=4, chunk_size=16,
              use_bias=use_bias, use_conv_bias=True, layer_norm_epsilon=1e-5,
              tie_word_embeddings=tied, pad_token_id=None, bos_token_id=None,
              eos_token_id=256)
    kw.update(over)
    model = Mamba2ForCausalLM(Mamba2Config(**kw)).eval()
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D", ".bias"), 0.2)
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64; Mamba2ForCausalLM returns its logits
    cast to fp32 (~1e-7 here), hence the 1e-5 tolerance below."""
    with torch.no_grad():
        return model.double()(torch.tensor([tokens])).logits[0].double()


@pytest.mark.parametrize("tied,use_bias", [(False, False), (True, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, tied, use_bias):
    model = make_model(seed=1, tied=tied, use_bias=use_bias)
    src = tmp_path / "hf"
    # transformers 4.48.3 writes a tied Mamba2ForCausalLM only as
    # pytorch_model.bin: its safetensors save refuses the shared head.
    model.save_pretrained(src, safe_serialization=not tied)
    out = tmp_path / "out"
    conf, err = cases.convert_ok("hf-mamba2", src, out, capsys)
    assert "warning" not in err
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS, min_std=0.5)

    assert [b["kind"] for b in conf["blocks"]] == ["mamba2"] * 3
    b = conf["blocks"][0]
    assert b == {"kind": "mamba2", "norm": {"type": "rmsnorm", "eps": 1e-5}, "n_heads": 8,
                 "head_dim": 12, "d_state": 20, "n_groups": 1, "d_conv": 4,
                 "in_proj_bias": use_bias, "out_proj_bias": use_bias, "conv_bias": True,
                 "dt_min": 0.0, "dt_max": None, "gated_norm_eps": 1e-5}
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256

    t = cases.written_tensors(out, "hf-mamba2", tied)
    sd = model.state_dict()
    assert torch.equal(t["blocks.2.gated_norm.weight"].double(),
                       sd["backbone.layers.2.mixer.norm.weight"])
    assert torch.equal(t["blocks.1.conv.weight"].double(),
                       sd["backbone.layers.1.mixer.conv1d.weight"][:, 0])
    assert torch.equal(t["blocks.0.A"].double(),
                       -torch.exp(sd["backbone.layers.0.mixer.A_log"].float()).double())


def test_groups_and_time_step_limit_are_carried(tmp_path, capsys):
    model = make_model(seed=2, n_groups=4, time_step_limit=(0.002, 0.08))
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf, err = cases.convert_ok("hf-mamba2", src, out, capsys)
    # The references disagree between prefill and decode on a clamped dt.
    assert "convert: warning: time_step_limit [0.002, 0.08]" in err
    b = conf["blocks"][1]
    assert (b["n_groups"], b["dt_min"], b["dt_max"]) == (4, 0.002, 0.08)
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert tuple(t["blocks.1.conv.weight"].shape) == (96 + 2 * 4 * 20, 4)
    assert tuple(t["blocks.1.in_proj.weight"].shape) == (96 + 96 + 160 + 8, 48)


test_every_save_pretrained_layout_converts_alike = cases.layouts_test(
    "hf-mamba2", lambda: make_model(seed=4))
test_truncated_pytorch_bin = cases.truncated_bin_test("hf-mamba2", make_model)


def test_dtype_option_and_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(seed=5), tmp_path / "hf")
    cases.assert_bf16_conversion(
        "hf-mamba2", src, tmp_path / "bf16", "3 mamba2 blocks",
        ("blocks.0.in_proj.weight", "blocks.0.conv.weight", "blocks.0.gated_norm.weight",
         "blocks.0.out_proj.weight", "embed.weight", "lm_head.weight"),
        ("blocks.0.A", "blocks.0.D", "blocks.0.dt_bias"))


def _limit(value, needles):
    return cases.config_case(needles, time_step_limit=value)


_cfg = cases.config_case

CORRUPT = {
    "missing_tensor": cases.missing_tensor("backbone.layers.1.mixer.dt_bias"),
    "missing_gated_norm": cases.missing_tensor("backbone.layers.2.mixer.norm.weight"),
    "wrong_shape": cases.wrong_shape("backbone.layers.0.mixer.in_proj.weight", (239, 48),
                                     (240, 48)),
    "A_log_per_channel": cases.wrong_shape("backbone.layers.0.mixer.A_log", (8, 20), (8,)),
    "unknown_tensor": cases.unknown_tensor("backbone.layers.0.mixer.dt_proj.weight",
                                           torch.zeros(8, 8)),
    "lm_head_missing": cases.LM_HEAD_MISSING,
    "integer_tensor": cases.integer_tensor("backbone.layers.1.mixer.D", 8),
    "unknown_architecture": _cfg(["unknown architecture", "'mamba'"], model_type="mamba",
                                 architectures=["MambaForCausalLM"]),
    "bias_missing": _cfg(["missing tensor", "backbone.layers.0.mixer.in_proj.bias"],
                         use_bias=True),
    "activation": cases.ACTIVATION,
    "no_norm": _cfg(["rms_norm"], rms_norm=False),
    "norm_before_gate": _cfg(["norm_before_gate"], norm_before_gate=True),
    "heads_mismatch": _cfg(["num_heads", "6 x 'head_dim' 12 = 72", "96"], num_heads=6),
    "groups_do_not_divide": _cfg(["n_groups", "num_heads 8"], n_groups=3),
    "groups_default": (lambda s: edit_config(s, lambda c: c.pop("n_groups")),
                       ["backbone.layers.0.mixer.conv1d.bias", "[136]", "[416]"]),
    "limit_not_pair": _limit([0.0], ["time_step_limit"]),
    "limit_reversed": _limit([0.1, 0.01], ["time_step_limit", "[0.1, 0.01]"]),
    "limit_negative": _limit([-1.0, math.inf], ["time_step_limit"]),
    "state_size": _cfg(["state_size", "positive integer"], state_size=0),
    **hf_layouts.BROKEN_FILES,
}

test_bad_checkpoint_is_a_clean_error = cases.bad_checkpoint_test("hf-mamba2", make_model, CORRUPT)

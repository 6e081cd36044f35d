"""`--source falcon-mamba`: HF FalconMamba checkpoints -> canonical mamba1 blocks.

The converted directory, run by the float64 reference, must give transformers'
own forward; every layout save_pretrained writes converts alike; every bad
input is an error that names its culprit, exits 1 and leaves no output behind.
(tests/python/parity/test_hf_falcon_mamba_parity.py runs the C++ engine.)
"""


import pytest
import torch

from weights.reference.model import ReferenceModel

import converter_cases as cases
import hf_layouts
import hf_models
from convert_cli import edit_config, edit_tensors, run, run_process

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import FalconMambaConfig, FalconMambaForCausalLM  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 70, 97, 108, 99, 111, 110, 32, 77, 97, 109, 98, 97, 10, 0, 255, 200, 7, 256,
          65, 66, 67, 68, 69, 70, 71, 72, 73]


def make_model(seed=0, tied=True, use_bias=False, **over):
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=32, state_size=6, num_hidden_layers=3,
              intermediate_size=80, conv_kernel=3, time_step_rank=5, use_bias=use_bias,
              use_conv_bias=True, layer_norm_epsilon=1e-5, mixer_rms_eps=1e-3,
              tie_word_embeddings=tied, pad_token_id=None, bos_token_id=None, eos_token_id=256)
    kw.update(over)
    model = FalconMambaForCausalLM(FalconMambaConfig(**kw)).eval()
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D", ".bias"), 0.2)
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64. Its mixer rounds A, B, the scan input
    and every RMS norm to fp32, and it returns the logits as fp32 (~1e-6 on
    the logits); hence the tolerance."""
    with torch.no_grad():
        return model.double()(torch.tensor([tokens]), use_cache=False).logits[0].double()


@pytest.mark.parametrize("tied,use_bias", [(True, False), (False, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, tied, use_bias):
    model = make_model(seed=1, tied=tied, use_bias=use_bias)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    conf, _ = cases.convert_ok("falcon-mamba", src, out, capsys)
    cases.assert_reference_matches(out, hf_float64_logits(model, TOKENS), TOKENS, min_std=0.1)

    b = conf["blocks"][0]
    assert [x["kind"] for x in conf["blocks"]] == ["mamba1"] * 3
    assert b["norm"] == {"type": "rmsnorm", "eps": 1e-5}
    assert b["dt_bc_norm"] == {"type": "rmsnorm", "eps": 1e-3, "affine": False}
    assert (b["d_inner"], b["d_state"], b["d_conv"], b["dt_rank"]) == (80, 6, 3, 5)
    assert b["in_proj_bias"] == b["out_proj_bias"] == use_bias and b["conv_bias"]
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256
    cases.written_tensors(out, "falcon-mamba", tied)


def test_mixer_norm_is_what_separates_it_from_mamba(tmp_path, capsys):
    """The same tensors read as a plain Mamba (no dt/B/C norms) give other
    logits: the norms are doing their part of the comparison above."""
    model = make_model(seed=2)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    cases.convert_ok("falcon-mamba", src, out, capsys)
    m = ReferenceModel.load(out, torch.float64)
    with_norm = m.forward(TOKENS)
    for blk in m.config["blocks"]:
        del blk["dt_bc_norm"]
    assert (m.forward(TOKENS) - with_norm).abs().max() > 1e-2


def test_defaults_expand_and_auto_rank(tmp_path, capsys):
    """Absent fields take FalconMambaConfig's defaults; intermediate_size wins
    over a contradicting expand (falcon-mamba-7b ships expand 16 beside
    intermediate_size 8192)."""
    model = make_model(seed=3, time_step_rank="auto", eos_token_id=11, bos_token_id=0)
    src = hf_layouts.save(model, tmp_path / "hf")

    def strip(c):
        for key in ("mixer_rms_eps", "use_bias", "use_conv_bias", "tie_word_embeddings",
                    "time_step_rank"):
            c.pop(key, None)
        c["expand"] = 16
    edit_config(src, strip)
    conf = cases.convert_with_tokenizer("falcon-mamba", src, tmp_path / "out", capsys)
    b = conf["blocks"][0]
    assert b["dt_bc_norm"]["eps"] == 1e-6 and b["d_inner"] == 80 and b["dt_rank"] == 2
    assert (conf["eos_token_id"], conf["bos_token_id"]) == (11, 0)

    def no_inner(c):
        del c["intermediate_size"]
        c["expand"] = 2
    edit_config(src, no_inner)
    out2 = tmp_path / "out2"
    code, err = run(["--source", "falcon-mamba", str(src), str(out2), "--byte-tokenizer"],
                    capsys)
    assert code == 1, err
    assert "backbone.layers.0.mixer.A_log" in err and "expected [64, 6]" in err


test_every_save_pretrained_layout_converts_alike = cases.layouts_test(
    "falcon-mamba", lambda: make_model(seed=4))
test_truncated_pytorch_bin = cases.truncated_bin_test("falcon-mamba", make_model)


def test_dtype_option_and_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(seed=5), tmp_path / "hf")
    cases.assert_bf16_conversion(
        "falcon-mamba", src, tmp_path / "bf16", "3 mamba1 blocks",
        ("blocks.0.in_proj.weight", "blocks.0.x_proj.weight", "embed.weight"),
        ("blocks.0.A", "blocks.0.D", "blocks.0.dt_proj.bias"))

    proc = run_process(["--source", "falcon-mamba", str(src), str(tmp_path / "w"),
                        "--byte-tokenizer", "--window", "8"])
    assert proc.returncode == 1 and "--window does not apply" in proc.stderr


_cfg = cases.config_case

CORRUPT = {
    "missing_tensor": cases.missing_tensor("backbone.layers.2.mixer.dt_proj.bias"),
    "wrong_shape": cases.wrong_shape("backbone.layers.1.mixer.x_proj.weight", (16, 80),
                                     (17, 80)),
    # The norms' all-ones buffers are not persistent: a file holding one is
    # not what transformers writes.
    "norm_buffer": cases.unknown_tensor("backbone.layers.0.mixer.b_c_rms", torch.ones(6)),
    "lm_head_missing": _cfg(["missing tensor 'lm_head.weight'"], tie_word_embeddings=False),
    "integer_tensor": (lambda s: edit_tensors(s, lambda t: t.update(
        {"backbone.layers.0.mixer.D": torch.ones(80, dtype=torch.int32)})),
        ["backbone.layers.0.mixer.D", "not floating point"]),
    "plain_mamba": _cfg(["unknown architecture", "'mamba'", "falcon_mamba"], model_type="mamba",
                        architectures=["MambaForCausalLM"]),
    "bias_missing": _cfg(["missing tensor", "backbone.layers.0.mixer.in_proj.bias"],
                         use_bias=True),
    "activation": cases.ACTIVATION,
    "mixer_eps": _cfg(["mixer_rms_eps", "positive number"], mixer_rms_eps=0),
    "rank": _cfg(["time_step_rank"], time_step_rank="big"),
    "bias_flag": _cfg(["use_conv_bias", "true or false"], use_conv_bias="yes"),
    "eos": _cfg(["eos_token_id", "vocab_size 257"], eos_token_id=300),
    **hf_layouts.BROKEN_FILES,
}

test_bad_checkpoint_is_a_clean_error = cases.bad_checkpoint_test(
    "falcon-mamba", make_model, CORRUPT)

"""`--source mamba-ssm` on original state-spaces/mamba Mamba-2 checkpoints
(config.json with ssm_cfg.layer "Mamba2" + pytorch_model.bin, the layout of
state-spaces/mamba2-*): the converted directory, run by the float64 reference,
gives transformers' float64 forward of the same weights (n_groups = 1, where
transformers is right); absent mixer fields take mamba_ssm's defaults; bad
configs are errors naming the field, with nothing written. Also the Mistral
format of Mamba-Codestral (params.json + consolidated.safetensors), which must
convert exactly as the same weights in the mamba_ssm layout do.
"""

import json

import pytest
import torch

from weights import safetensors_io
from weights.converters import mamba2_ssm
from weights.converters.convert_error import ConvertWarning
from weights.reference.model import ReferenceModel

import hf_models
from convert_cli import assert_clean_failure, run

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import Mamba2Config, Mamba2ForCausalLM  # noqa: E402

hf_models.stub_dynamo()

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85]

# The 130m release's config.json (MODELS.md 7.9).
RELEASED_130M = {"d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277,
                 "ssm_cfg": {"layer": "Mamba2"}, "attn_layer_idx": [], "attn_cfg": {},
                 "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
                 "pad_vocab_size_multiple": 16, "tie_embeddings": True}


def write_checkpoint(path, seed=0):
    """A Mamba2ForCausalLM (head_dim 12, d_state 20) saved as mamba_ssm saves its
    model: its state dict under mamba_ssm's names, with lm_head.weight (tied),
    and a mamba_ssm config.json. Returns the transformers model."""
    torch.manual_seed(seed)
    model = Mamba2ForCausalLM(Mamba2Config(
        vocab_size=264, hidden_size=48, expand=2, num_heads=8, head_dim=12, state_size=20,
        n_groups=1, num_hidden_layers=2, conv_kernel=4, chunk_size=16, use_bias=False,
        use_conv_bias=True, layer_norm_epsilon=1e-5, tie_word_embeddings=True)).eval()
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D", ".bias"), 0.2)
    path.mkdir()
    state = {k.replace("backbone.embeddings.", "backbone.embedding."): v.clone()
             for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["backbone.embedding.weight"].clone()
    torch.save(state, path / "pytorch_model.bin")
    (path / "config.json").write_text(json.dumps(
        {"d_model": 48, "d_intermediate": 0, "n_layer": 2, "vocab_size": 264,
         "ssm_cfg": {"layer": "Mamba2", "d_state": 20, "headdim": 12, "chunk_size": 16},
         "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
         "pad_vocab_size_multiple": 8, "tie_embeddings": True}))
    return model


def test_converted_model_matches_transformers(tmp_path, capsys):
    model = write_checkpoint(tmp_path / "ssm", seed=3)
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out),
                     "--byte-tokenizer"], capsys)
    assert code == 0, err
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    with torch.no_grad():
        want = model.double()(torch.tensor([TOKENS])).logits[0].double()
    assert ref.std() > 0.3
    assert torch.allclose(ref, want, rtol=0, atol=1e-5), (ref - want).abs().max()
    conf = json.loads((out / "config.json").read_text())
    assert [b["kind"] for b in conf["blocks"]] == ["mamba2", "mamba2"]
    assert conf["blocks"][0]["gated_norm_eps"] == 1e-5 and conf["tie_embeddings"]


def test_released_config_takes_mamba_ssm_defaults():
    dims = mamba2_ssm.read_dims(RELEASED_130M)
    assert dims == {"vocab_size": 50288, "d_model": 768, "n_layers": 24, "n_heads": 24,
                    "head_dim": 64, "d_state": 128, "n_groups": 1, "d_conv": 4,
                    "in_proj_bias": False, "out_proj_bias": False, "conv_bias": True,
                    "dt_min": 0.0, "dt_max": None, "eps": 1e-5, "gated_norm_eps": 1e-5}
    with pytest.warns(ConvertWarning, match="ssm_cfg.dt_limit"):
        grouped = mamba2_ssm.read_dims(dict(RELEASED_130M, ssm_cfg={
            "layer": "Mamba2", "ngroups": 8, "dt_limit": [0.001, 0.1], "bias": True}))
    assert (grouped["n_groups"], grouped["dt_min"], grouped["dt_max"]) == (8, 0.001, 0.1)
    assert grouped["in_proj_bias"] and grouped["out_proj_bias"]


@pytest.mark.parametrize("ssm_cfg, needle", [
    ({"foo": 1}, "unknown ssm_cfg fields ['foo']"),
    ({"d_ssm": 48}, "ssm_cfg.d_ssm 48"),
    ({"D_has_hdim": True}, "ssm_cfg.D_has_hdim"),
    ({"rmsnorm": False}, "ssm_cfg.rmsnorm"),
    ({"norm_before_gate": True}, "ssm_cfg.norm_before_gate"),
    ({"learnable_init_states": True}, "ssm_cfg.learnable_init_states"),
    ({"activation": "relu"}, "ssm_cfg.activation 'relu'"),
    ({"headdim": 7}, "ssm_cfg.headdim 7 does not divide d_inner 96"),
    ({"ngroups": 3}, "ssm_cfg.ngroups 3 does not divide the 8 heads"),
    ({"dt_limit": [0.1]}, "ssm_cfg.dt_limit"),
    ({"d_state": 21}, "backbone.layers.0.mixer.conv1d.bias"),
])
def test_bad_config_is_a_clean_error(tmp_path, capsys, ssm_cfg, needle):
    write_checkpoint(tmp_path / "ssm")
    path = tmp_path / "ssm" / "config.json"
    cfg = json.loads(path.read_text())
    cfg["ssm_cfg"].update(ssm_cfg)
    path.write_text(json.dumps(cfg))
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out),
                     "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, needle)


# mistral-inference's params.json (MambaArgs) of a Codestral-shaped model scaled
# down: mamba_ssm's mixer defaults (headdim 64, d_state 128, expand 2) with
# n_groups 2 over 2 heads.
MISTRAL_PARAMS = {"dim": 64, "n_layers": 2, "vocab_size": 260, "n_groups": 2, "rms_norm": True,
                  "residual_in_fp32": True, "fused_add_norm": True,
                  "pad_vocab_size_multiple": 8, "tie_embeddings": False, "model_type": "mamba"}


def mamba_ssm_state(seed):
    """A random Mamba-2 state dict under mamba_ssm's names at MISTRAL_PARAMS'
    shapes (vocab padded to 264), lm_head untied."""
    torch.manual_seed(seed)
    model = Mamba2ForCausalLM(Mamba2Config(
        vocab_size=264, hidden_size=64, expand=2, num_heads=2, head_dim=64, state_size=128,
        n_groups=2, num_hidden_layers=2, conv_kernel=4, use_bias=False, use_conv_bias=True,
        tie_word_embeddings=False))
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D", ".bias"), 0.2)
    return {k.replace("backbone.embeddings.", "backbone.embedding."): v.detach().clone()
            for k, v in model.state_dict().items()}


def write_mistral_checkpoint(path, state, params=MISTRAL_PARAMS, edit=None):
    """params.json + consolidated.safetensors, as mistral-inference loads them;
    `edit` changes the file's tensors (named as in the file) first."""
    path.mkdir()
    (path / "params.json").write_text(json.dumps(params))
    tensors = {"model." + k: v for k, v in state.items()}
    if edit is not None:
        edit(tensors)
    safetensors_io.save_file(tensors, path / "consolidated.safetensors")


def test_mistral_format_converts_as_its_mamba_ssm_layout(tmp_path, capsys):
    # The same weights saved as mamba_ssm saves them, with the config.json
    # mistral-inference builds from params.json, must convert to the same model.
    state = mamba_ssm_state(seed=6)
    write_mistral_checkpoint(tmp_path / "mistral", state)
    ssm = tmp_path / "ssm"
    ssm.mkdir()
    torch.save(state, ssm / "pytorch_model.bin")
    (ssm / "config.json").write_text(json.dumps(
        {"d_model": 64, "n_layer": 2, "vocab_size": 260, "d_intermediate": 0,
         "ssm_cfg": {"ngroups": 2, "layer": "Mamba2"}, "attn_layer_idx": [], "attn_cfg": {},
         "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
         "pad_vocab_size_multiple": 8, "tie_embeddings": False}))
    for src in ("mistral", "ssm"):
        code, err = run(["--source", "mamba-ssm", str(tmp_path / src),
                         str(tmp_path / f"{src}_out"), "--byte-tokenizer", "--name", "tiny"],
                        capsys)
        assert code == 0, err
    got = json.loads((tmp_path / "mistral_out" / "config.json").read_text())
    assert got == json.loads((tmp_path / "ssm_out" / "config.json").read_text())
    assert got["vocab_size"] == 264 and not got["tie_embeddings"]
    assert [(b["kind"], b["n_heads"], b["head_dim"], b["d_state"], b["n_groups"],
             b["gated_norm_eps"]) for b in got["blocks"]] == [("mamba2", 2, 64, 128, 2, 1e-5)] * 2
    a, _ = safetensors_io.load_file(tmp_path / "mistral_out" / "model.safetensors")
    b, _ = safetensors_io.load_file(tmp_path / "ssm_out" / "model.safetensors")
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
    # The grouped model loads and runs (the engine's G > 1 semantics are checked
    # in tests/python/parity/test_mamba2_parity.py).
    assert ReferenceModel.load(tmp_path / "mistral_out", torch.float64).forward(TOKENS).std() > 0


def _params(**edit):
    p = dict(MISTRAL_PARAMS)
    for k, v in edit.items():
        if v is None:
            p.pop(k)
        else:
            p[k] = v
    return p


@pytest.mark.parametrize("params,edit,needle", [
    (_params(n_groups=None), None, "params.json: missing fields ['n_groups']"),
    (_params(head_dim=64), None, "params.json: unknown fields ['head_dim']"),
    (_params(model_type="transformer"), None, "model_type 'transformer'"),
    (_params(rms_norm=False), None, "rms_norm=false"),
    (_params(tie_embeddings="no"), None, "'tie_embeddings' must be true or false"),
    (_params(n_groups=3), None, "ngroups 3 does not divide the 2 heads"),
    (_params(dim=0), None, "params.json: field 'dim' must be a positive integer"),
    # A tensor outside the wrapper's `model.`, and one inside it that mamba_ssm lacks.
    (MISTRAL_PARAMS, lambda t: t.update(extra=torch.zeros(1)),
     "unknown tensor 'extra' in consolidated.safetensors"),
    (MISTRAL_PARAMS, lambda t: t.update({"model.backbone.layers.0.mixer.x_proj.weight":
                                         torch.zeros(2, 2)}),
     "unknown tensor 'backbone.layers.0.mixer.x_proj.weight'"),
    (MISTRAL_PARAMS, lambda t: t.pop("model.backbone.layers.1.mixer.A_log"),
     "missing tensor 'backbone.layers.1.mixer.A_log'"),
    (MISTRAL_PARAMS, lambda t: t.pop("model.lm_head.weight"), "missing tensor 'lm_head.weight'"),
])
def test_bad_mistral_checkpoint_is_a_clean_error(tmp_path, capsys, params, edit, needle):
    write_mistral_checkpoint(tmp_path / "ckpt", mamba_ssm_state(seed=7), params, edit)
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ckpt"), str(out),
                     "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, needle)


def test_mistral_format_without_weights(tmp_path, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "params.json").write_text(json.dumps(MISTRAL_PARAMS))
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ckpt"), str(out),
                     "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "params.json but no consolidated.safetensors")

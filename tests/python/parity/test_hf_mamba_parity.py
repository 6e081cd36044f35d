"""Converted Hugging Face Mamba checkpoints give the numbers transformers gives.

A small MambaForCausalLM is randomly initialised by transformers itself and saved
exactly as the real checkpoints are (save_pretrained, safetensors; and the original
mamba_ssm layout as a torch.save'd state dict). Each is converted with
`python -m weights.convert`, loaded by the C++ engine, and compared with
transformers' own forward (last-token logits over a 128-token prompt) and its own
greedy generate() (64 tokens, through its recurrent cache path).
"""

import json
import subprocess

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import MambaConfig, MambaForCausalLM  # noqa: E402

import hf_models  # noqa: E402
from engine_run import convert, engine_greedy  # noqa: E402
from hf_run import hf_recurrent_greedy  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS, so every id the model can emit is sampleable


def make_hf_model(seed, use_bias):
    torch.manual_seed(seed)
    cfg = MambaConfig(vocab_size=VOCAB, hidden_size=48, state_size=8, num_hidden_layers=3,
                      intermediate_size=96, conv_kernel=4, time_step_rank=4, use_bias=use_bias,
                      use_conv_bias=True, layer_norm_epsilon=1e-5, residual_in_fp32=True,
                      tie_word_embeddings=True)
    model = MambaForCausalLM(cfg).eval()
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D"), 0.1)
    # Spread the tied-head logits so greedy choices are not near-ties.
    hf_models.scale(model, ("embeddings.weight",), 20.0)
    return model


def engine_last_logits(binary, model_dir, prompt, tmp_path):
    out = tmp_path / "logits.npy"
    subprocess.run([str(binary), "--model", str(model_dir),
                    "--tokens", ",".join(map(str, prompt)), "--out", str(out), "--chunk", "32"],
                   check=True, capture_output=True)
    return np.load(out)[-1]


def prompt_ids(n=128):
    text = ("Mamba is a selective state space model; its state has a fixed size, so the "
            "cost of a token does not grow with the context. ") * 2
    return list(text.encode())[:n]


@pytest.mark.parametrize("use_bias", [False, True])
def test_save_pretrained_checkpoint_matches_transformers(tmp_path, use_bias, repo_root,
                                                         engine_logits, engine_generate):
    model = make_hf_model(seed=11, use_bias=use_bias)
    src = tmp_path / "hf"
    model.save_pretrained(src, safe_serialization=True)
    out = tmp_path / "canonical"
    convert(repo_root, "hf-mamba", src, out)

    prompt = prompt_ids()
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0, -1].numpy()
    got = engine_last_logits(engine_logits, out, prompt, tmp_path)
    assert want.std() > 1.0  # logits are spread, so the comparison means something
    assert np.abs(got - want).max() <= 1e-3

    want_ids = hf_recurrent_greedy(model, prompt, 64)
    assert engine_greedy(engine_generate, out, prompt, 64) == want_ids


def test_mamba_ssm_layout_matches_transformers(tmp_path, repo_root, engine_logits):
    model = make_hf_model(seed=5, use_bias=False)
    src = tmp_path / "ssm"
    src.mkdir()
    state = {k.replace("backbone.embeddings.", "backbone.embedding."): v
             for k, v in model.state_dict().items()}
    torch.save(state, src / "pytorch_model.bin")
    (src / "config.json").write_text(json.dumps(
        {"d_model": 48, "n_layer": 3, "vocab_size": VOCAB, "ssm_cfg": {"d_state": 8, "d_conv": 4,
         "expand": 2, "dt_rank": 4}, "rms_norm": True, "residual_in_fp32": True,
         "fused_add_norm": True, "pad_vocab_size_multiple": 1, "tie_embeddings": True}))
    out = tmp_path / "canonical"
    convert(repo_root, "mamba-ssm", src, out)
    prompt = prompt_ids()
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0, -1].numpy()
    got = engine_last_logits(engine_logits, out, prompt, tmp_path)
    assert np.abs(got - want).max() <= 1e-3

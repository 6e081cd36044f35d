"""Converted Hugging Face FalconMamba checkpoints give the numbers transformers gives.

A small FalconMambaForCausalLM (Mamba-1 with weightless RMS norms over the dt,
B and C slices of x_proj's output; d_state and dt_rank not powers of two, a
mixer eps large enough that using the block norms' eps instead would show) is
randomly initialised by transformers itself, saved with save_pretrained
(safetensors), converted with `python -m weights.convert --source falcon-mamba`
and run by the C++ engine: logits at every position of a 130-token prompt
within 1e-3 (fp32), prefilled in chunks of 32 and of 7 tokens (neither divides
the prompt), and 64 greedy tokens identical to transformers' own greedy loop
through its recurrent cache (the engine prefills in 16-token steps).
"""

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import FalconMambaConfig, FalconMambaForCausalLM  # noqa: E402

import hf_models  # noqa: E402
from engine_run import convert, engine_greedy, run_engine  # noqa: E402
from hf_run import hf_recurrent_greedy  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS


def make_hf_model(seed, tied, use_bias):
    torch.manual_seed(seed)
    cfg = FalconMambaConfig(vocab_size=VOCAB, hidden_size=48, state_size=12,
                            num_hidden_layers=3, intermediate_size=112, conv_kernel=4,
                            time_step_rank=6, use_bias=use_bias, use_conv_bias=True,
                            layer_norm_epsilon=1e-5, mixer_rms_eps=1e-3, residual_in_fp32=True,
                            tie_word_embeddings=tied, pad_token_id=None, bos_token_id=None,
                            eos_token_id=256)
    model = FalconMambaForCausalLM(cfg).eval()
    hf_models.perturb(model, ("norm.weight", "norm_f.weight", "mixer.D", ".bias"), 0.1)
    # Spread the logits so greedy choices are not near-ties. Through a tied
    # head the residual's own token would win every step unless the mixers
    # outweigh the embedding.
    hf_models.scale(model, ("embeddings.weight", "lm_head.weight"), 2.0 if tied else 20.0)
    if tied:
        hf_models.scale(model, ("out_proj.weight",), 20.0)
    return model


def prompt_ids(n=130):
    text = ("Falcon Mamba normalises dt, B and C before the selective scan; the state "
            "stays the same size however long the stream grows. ") * 2
    return list(text.encode())[:n]


@pytest.mark.parametrize("tied,use_bias,seed", [(True, False, 11), (False, True, 7)])
def test_save_pretrained_checkpoint_matches_transformers(tmp_path, tied, use_bias, seed,
                                                         repo_root, engine_logits,
                                                         engine_generate):
    model = make_hf_model(seed, tied, use_bias)
    src = tmp_path / "hf"
    model.save_pretrained(src, safe_serialization=True)
    out = tmp_path / "canonical"
    convert(repo_root, "falcon-mamba", src, out)

    prompt = prompt_ids()
    with torch.no_grad():
        want = model(torch.tensor([prompt]), use_cache=False).logits[0].numpy()
    assert want[-1].std() > 1.0  # logits are spread, so the comparison means something
    for chunk in (32, 7):
        assert len(prompt) % chunk
        got = run_engine(engine_logits, out, prompt, tmp_path / f"logits{chunk}.npy", chunk)
        err = np.abs(got - want).max()
        print(f"chunk {chunk}: max |engine - transformers| {err:.2e}")
        assert err <= 1e-3, f"chunk {chunk}: max |engine - transformers| {err:.2e}"

    want_ids = hf_recurrent_greedy(model, prompt, 64)
    assert len(set(want_ids)) > 4  # not a degenerate repetition of one token
    assert engine_greedy(engine_generate, out, prompt, 64) == want_ids

"""Converted Qwen2 and Mistral checkpoints give the numbers transformers 4.48.3 gives.

Qwen2ForCausalLM: the Llama decoder with q/k/v biases (never o_proj's), here
with the yarn rope_scaling Qwen2.5's model card adds (legacy "type" key), and
a cache that holds the whole stream, so the engine must equal transformers'
full attention: logits over a 128-token prompt within 1e-3 (fp32) and 64
greedy tokens identical.

MistralForCausalLM with a sliding window of 48 keys, prompt 128: the
converter's default cache (no sinks, window 47) is the checkpoint's own rule,
so the engine must equal transformers' eager attention, whose mask keeps
exactly the 48 most recent keys, on the whole prompt and the generation.
Adding sinks (--sinks 2) is a model change the float64 reference follows
and transformers does not.
"""

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import (MistralConfig, MistralForCausalLM, Qwen2Config,  # noqa: E402
                          Qwen2ForCausalLM)

import hf_models  # noqa: E402
from engine_run import convert, engine_greedy, run_engine  # noqa: E402
from hf_run import assert_engine_matches_transformers, hf_greedy  # noqa: E402
from weights.reference.model import ReferenceModel  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS
SLIDING_WINDOW = 48


def spread(model, tied):
    """Norms and biases moved off their initial values (so a dropped one shows),
    embeddings scaled so greedy choices are not near-ties."""
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", ".bias"), 0.1)
    hf_models.scale(model, ("embed_tokens.weight", "lm_head.weight"), 2.0 if tied else 8.0)
    return model


def make_qwen2(seed, tied, rope_scaling=None):
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=512,
                      tie_word_embeddings=tied, initializer_range=0.15,
                      use_sliding_window=False, sliding_window=512, max_window_layers=1,
                      bos_token_id=None, eos_token_id=256, rope_scaling=rope_scaling)
    return spread(Qwen2ForCausalLM(cfg).eval(), tied)


def make_mistral(seed):
    torch.manual_seed(seed)
    cfg = MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                        max_position_embeddings=512, sliding_window=SLIDING_WINDOW,
                        tie_word_embeddings=False, initializer_range=0.15,
                        bos_token_id=None, eos_token_id=256)
    return spread(MistralForCausalLM(cfg).eval(), tied=False)


def prompt_ids(n=128):
    text = ("A sliding window keeps the most recent keys; sinks keep the first ones, "
            "and both keep the cache a constant size. ") * 3
    return list(text.encode())[:n]


# Qwen2.5-0.5B ties its embeddings; the 7B is untied and takes the yarn setting.
@pytest.mark.parametrize("tied,rope_scaling", [
    (True, None),
    (False, {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}),
])
def test_qwen2_matches_transformers(tmp_path, repo_root, engine_logits, engine_generate, tied,
                                    rope_scaling):
    model = make_qwen2(seed=6, tied=tied, rope_scaling=rope_scaling)
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    assert model.model.layers[0].self_attn.o_proj.bias is None
    assert_engine_matches_transformers(model, "hf-llama", prompt_ids(), tmp_path, repo_root,
                                       engine_logits, engine_generate)


def test_mistral_sliding_window_matches_transformers(tmp_path, repo_root, engine_logits,
                                                     engine_generate):
    model = make_mistral(seed=7)
    src, out = tmp_path / "hf", tmp_path / "canonical"
    model.save_pretrained(src, safe_serialization=True)
    convert(repo_root, "hf-llama", src, out)      # the checkpoint's own window
    prompt = prompt_ids()
    assert len(prompt) > 2 * SLIDING_WINDOW

    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0].numpy()
    for chunk in (16, 128):
        got = run_engine(engine_logits, out, prompt, tmp_path / "logits.npy", chunk)
        err = np.abs(got - want).max()
        assert err <= 1e-3, f"chunk {chunk}: max |engine - transformers| {err:.2e}"
    assert want[-1].std() > 1.0

    want_ids = hf_greedy(model, prompt, 64)
    assert len(set(want_ids)) > 4
    assert engine_greedy(engine_generate, out, prompt, 64) == want_ids

    # The window is in effect: full attention gives other logits past it.
    model.config.sliding_window = None
    with torch.no_grad():
        full = model(torch.tensor([prompt])).logits[0].numpy()
    assert np.abs(full[:SLIDING_WINDOW] - want[:SLIDING_WINDOW]).max() <= 1e-4
    assert np.abs(full[SLIDING_WINDOW + 8:] - want[SLIDING_WINDOW + 8:]).max() > 0.1


def test_mistral_with_sinks_follows_the_sink_rule(tmp_path, repo_root, engine_logits):
    model = make_mistral(seed=8)
    src, out = tmp_path / "hf", tmp_path / "canonical"
    model.save_pretrained(src, safe_serialization=True)
    convert(repo_root, "hf-llama", src, out, "--sinks", "2")
    prompt = prompt_ids()
    ref = ReferenceModel.load(out, torch.float64).forward(prompt).numpy()
    got = run_engine(engine_logits, out, prompt, tmp_path / "logits.npy", 32)
    assert np.abs(got - ref).max() <= 1e-4
    with torch.no_grad():
        window_only = model(torch.tensor([prompt])).logits[0].numpy()
    # Until the window fills nothing is evicted and the sinks are ordinary keys.
    assert np.abs(ref[:SLIDING_WINDOW] - window_only[:SLIDING_WINDOW]).max() <= 1e-4
    assert np.abs(ref[SLIDING_WINDOW + 8:] - window_only[SLIDING_WINDOW + 8:]).max() > 0.1

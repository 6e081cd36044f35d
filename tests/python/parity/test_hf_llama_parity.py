"""Converted Hugging Face Llama checkpoints give the numbers transformers gives.

A small LlamaForCausalLM (GQA: 4 query heads over 2 KV heads, 2 layers) is
randomly initialised by transformers itself, saved with save_pretrained, converted
with `python -m weights.convert --source hf-llama` and run by the C++ engine.

With a cache that holds the whole stream (sinks + window >= prompt + generation)
attention sinks never evict, so the engine must equal transformers' full causal
attention: last-token logits over a 128-token prompt within 1e-3, and 64 greedy
tokens identical to transformers' own cached greedy loop (past_key_values).

With a small window the engine must instead follow StreamingLLM's sink rule,
checked against the float64 reference (weights/reference/attention.py) on the
converted directory; transformers' full attention then differs visibly, which
shows that the window is in effect.

Every rope_scaling type transformers 4.48.3 offers for Llama, except longrope,
is checked the same way (prompt and generation within the cache, so only the
frequencies and yarn's attention factor are under test). head_dim 16 at θ 1e4
has wavelengths 6 .. 19869 positions, so each type moves several pairs:
llama3 (original length 256, low 1, high 4) keeps pairs 0-2, blends pair 3 and
divides the rest; yarn (factor 4 over max_position_embeddings 512) ramps over
pairs 0-4. dynamic leaves RoPE plain while a forward pass spans at most
max_position_embeddings positions, which holds for this prompt and its
generation in transformers and always in the engine (its cache positions stay
below sinks + window + 1 <= max_position_embeddings). For a longer stream
transformers would raise θ for every position of a pass longer than 512; the
engine keeps plain RoPE over its rolling window (README).
"""

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

import hf_models  # noqa: E402
from engine_run import convert, run_engine  # noqa: E402
from hf_run import assert_engine_matches_transformers  # noqa: E402
from weights.reference.model import ReferenceModel  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS


ROPE_SCALING = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
    "yarn": {"rope_type": "yarn", "factor": 4.0},
}


def make_hf_model(seed, bias, tied, rope_scaling=None):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                      max_position_embeddings=512, attention_bias=bias, mlp_bias=bias,
                      tie_word_embeddings=tied, initializer_range=0.15,
                      bos_token_id=None, eos_token_id=256, rope_scaling=rope_scaling)
    model = LlamaForCausalLM(cfg).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", ".bias"), 0.1)
    # Spread the logits so greedy choices are not near-ties; a tied head gets
    # less, or the residual's own token wins every step.
    hf_models.scale(model, ("embed_tokens.weight", "lm_head.weight"), 2.0 if tied else 8.0)
    return model


def prompt_ids(n=128):
    text = ("Attention sinks keep the first tokens of a stream in the cache, so a "
            "model can run far beyond its training window. ") * 3
    return list(text.encode())[:n]


@pytest.mark.parametrize("bias,tied,seed", [(False, False, 3), (True, True, 4)])
def test_save_pretrained_checkpoint_matches_transformers(tmp_path, bias, tied, seed, repo_root,
                                                         engine_logits, engine_generate):
    model = make_hf_model(seed=seed, bias=bias, tied=tied)
    assert_engine_matches_transformers(model, "hf-llama", prompt_ids(), tmp_path, repo_root,
                                       engine_logits, engine_generate)


@pytest.mark.parametrize("kind", sorted(ROPE_SCALING))
def test_rope_scaling_matches_transformers(tmp_path, kind, repo_root, engine_logits,
                                           engine_generate):
    model = make_hf_model(seed=5, bias=False, tied=False, rope_scaling=ROPE_SCALING[kind])
    rot = model.model.rotary_emb
    plain = 1.0 / 10000.0 ** (torch.arange(0, 16, 2).float() / 16)
    # The premise: the type changes the numbers (dynamic only past 512 positions).
    if kind != "dynamic":
        assert not torch.equal(rot.inv_freq, plain) or rot.attention_scaling != 1.0
    assert_engine_matches_transformers(model, "hf-llama", prompt_ids(), tmp_path, repo_root,
                                       engine_logits, engine_generate)


def test_small_window_follows_the_sink_rule(tmp_path, repo_root, engine_logits):
    model = make_hf_model(seed=8, bias=True, tied=False)
    src = tmp_path / "hf"
    model.save_pretrained(src, safe_serialization=True)
    out = tmp_path / "canonical"
    convert(repo_root, "hf-llama", src, out, "--sinks", "4", "--window", "20")

    prompt = prompt_ids(160)
    ref = ReferenceModel.load(out, torch.float64).forward(prompt).numpy()
    for chunk in (1, 7, 64):
        got = run_engine(engine_logits, out, prompt, tmp_path / "logits.npy", chunk)
        assert np.abs(got - ref).max() <= 1e-4, chunk

    with torch.no_grad():
        full = model.double()(torch.tensor([prompt])).logits[0].numpy()
    # Before the cache fills (t < sinks + window + 1 keys) nothing is evicted.
    # (1e-4: transformers computes its RoPE frequencies in fp32.)
    assert np.abs(ref[:25] - full[:25]).max() <= 1e-4
    # Afterwards full attention sees keys the sink cache dropped.
    assert np.abs(ref[40:] - full[40:]).max() > 0.1

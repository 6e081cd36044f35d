"""Converted Hugging Face Jamba checkpoints give the numbers transformers gives.

A small JambaForCausalLM (6 layers: Mamba mixers with their dt/B/C norms,
attention without positional encoding over grouped KV heads, dense SwiGLU
layers and top-2 experts; every mixer / feed-forward pairing occurs) is randomly
initialised by transformers itself, saved with save_pretrained (safetensors),
converted with `python -m weights.convert --source hf-jamba` and run by the C++
engine. The attention cache holds the whole stream (sinks + window >= prompt +
generation), so the engine must equal transformers' full causal attention:
logits over a 128-token prompt within 1e-3 (fp32), and 64 greedy tokens
identical to transformers' own cached greedy loop.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import JambaConfig, JambaForCausalLM  # noqa: E402
from transformers.models.jamba.modeling_jamba import (  # noqa: E402
    HybridMambaAttentionDynamicCache)

import hf_models  # noqa: E402
from hf_run import assert_engine_matches_transformers  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS


def make_hf_model(seed, tied):
    torch.manual_seed(seed)
    cfg = JambaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96,
                      num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                      num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
                      expert_layer_offset=1, attn_layer_period=3, attn_layer_offset=1,
                      mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto",
                      rms_norm_eps=1e-6, tie_word_embeddings=tied, use_mamba_kernels=False,
                      initializer_range=0.1, pad_token_id=None, bos_token_id=None,
                      eos_token_id=256)
    model = JambaForCausalLM(cfg).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", "mamba.D", ".bias"), 0.2)
    # Decisive routing: a near-tie between two experts' probabilities could go
    # either way in fp32 and change the expert that runs.
    hf_models.scale(model, ("router.weight",), 10.0)
    # Spread the logits so greedy choices are not near-ties; a tied head gets
    # less, or the residual's own token wins every step.
    hf_models.scale(model, ("embed_tokens.weight", "lm_head.weight"), 2.0 if tied else 12.0)
    return model


def prompt_ids(n=128):
    text = ("Jamba interleaves Mamba layers with a few attention layers and routes "
            "every other feed-forward through a mixture of experts. ") * 3
    return list(text.encode())[:n]


@pytest.mark.parametrize("tied,seed", [(False, 3), (True, 5)])
def test_save_pretrained_checkpoint_matches_transformers(tmp_path, tied, seed, repo_root,
                                                         engine_logits, engine_generate):
    model = make_hf_model(seed=seed, tied=tied)
    prompt = prompt_ids()
    # Jamba's forward returns no cache unless it is given one to fill.
    cache = HybridMambaAttentionDynamicCache(model.config, 1, dtype=torch.float32)
    err = assert_engine_matches_transformers(model, "hf-jamba", prompt, tmp_path, repo_root,
                                             engine_logits, engine_generate, cache=cache)
    print(f"max |engine - transformers| over all {len(prompt)} positions: {err:.2e}")

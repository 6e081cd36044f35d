"""Converted Hugging Face Bamba checkpoints give the numbers transformers gives.

A small BambaForCausalLM (4 layers: Mamba-2 mixers with head_dim 12 and
d_state 20, attention at attn_layer_indices [1, 3] with grouped KV heads and
RoPE on half of each 16-channel head, an MLP in every layer; n_groups = 1,
since transformers 4.48.3 is wrong for more, MODELS.md 7.13) is randomly
initialised by transformers itself, saved with save_pretrained (safetensors),
converted with `python -m weights.convert --source hf-bamba` and run by the C++
engine. The attention cache holds the whole stream (sinks + window >= prompt +
generation), so the engine must equal transformers' full causal attention:
logits over a 131-token prompt within 1e-3 (fp32), prefilled in chunks of 32
and of 29 tokens (neither divides the prompt; transformers' own Mamba-2 scan
runs chunks of 16), and 64 greedy tokens identical to transformers' own cached
greedy loop.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import BambaConfig, BambaForCausalLM  # noqa: E402
from transformers.models.bamba.modeling_bamba import (  # noqa: E402
    HybridMambaAttentionDynamicCache)

import hf_models  # noqa: E402
from hf_run import assert_engine_matches_transformers  # noqa: E402

hf_models.stub_dynamo()

VOCAB = 257  # the byte tokenizer's ids: bytes + EOS


def make_hf_model(seed, tied, **over):
    torch.manual_seed(seed)
    kw = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=80, num_hidden_layers=4,
              num_attention_heads=3, num_key_value_heads=1, attn_layer_indices=[1, 3],
              mamba_n_heads=8, mamba_d_head="auto", mamba_n_groups=1, mamba_d_state=20,
              mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, rms_norm_eps=1e-5,
              max_position_embeddings=512, tie_word_embeddings=tied, initializer_range=0.1,
              pad_token_id=None, bos_token_id=None, eos_token_id=256)
    kw.update(over)
    model = BambaForCausalLM(BambaConfig(**kw)).eval()
    model.config._attn_implementation = "eager"
    hf_models.perturb(model, ("norm.weight", "layernorm.weight", "mamba.D", ".bias"), 0.2)
    # Spread the logits so greedy choices are not near-ties; a tied head gets
    # less, or the residual's own token wins every step.
    hf_models.scale(model, ("embed_tokens.weight", "lm_head.weight"), 2.0 if tied else 8.0)
    return model


def prompt_ids(n=131):
    text = ("Bamba runs Mamba-2 layers with a few attention layers between them, and "
            "every layer ends in a gated MLP. ") * 3
    return list(text.encode())[:n]


@pytest.mark.parametrize("tied,seed,over", [
    (False, 3, {}),
    # Biases everywhere (config.json overrides BambaConfig's hard-coded false),
    # and a quarter of each head rotated at another θ under yarn.
    (True, 5, dict(attention_bias=True, mlp_bias=True, mamba_proj_bias=True,
                   partial_rotary_factor=0.25, rope_theta=500000.0,
                   rope_scaling={"rope_type": "yarn", "factor": 4.0})),
])
def test_save_pretrained_checkpoint_matches_transformers(tmp_path, tied, seed, over, repo_root,
                                                         engine_logits, engine_generate):
    model = make_hf_model(seed=seed, tied=tied, **over)
    prompt = prompt_ids()
    assert len(prompt) > 4 * model.config.mamba_chunk_size
    # Bamba's forward returns no cache unless it is given one to fill.
    cache = HybridMambaAttentionDynamicCache(model.config, 1, dtype=torch.float32)
    err = assert_engine_matches_transformers(model, "hf-bamba", prompt, tmp_path, repo_root,
                                             engine_logits, engine_generate, cache=cache,
                                             chunks=(32, 29))
    print(f"max |engine - transformers| over all {len(prompt)} positions: {err:.2e}")

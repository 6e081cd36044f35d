"""Writes the Hugging Face golden files: tiny random checkpoints of the
architectures that transformers 4.48.3 (the project venv's) predates, with the
logits and greedy tokens that transformers itself gives for them.

    .venv-hf/bin/python tests/data/hf_golden/make.py [NAME ...]

Runs in the environment deploy/setup_hf.sh creates (PyPI torch and a current
transformers, apart from the project venv). Each NAME/ gets:
  hf/            save_pretrained's config.json and model.safetensors (fp32),
                 plus any tensor the architecture ships but transformers drops
                 on load (Qwen3.5's multi-token-prediction head)
  golden.json    the prompt, 64 greedy tokens from transformers' own cached
                 generation loop, and the versions that produced them
  logits.npy     transformers' fp32 logits over the whole prompt [T, V]
tests/python/parity/test_hf_golden_parity.py converts hf/ and checks the
engine against them; the tests never need this environment.
"""

import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
from hf_models import perturb, scale  # noqa: E402  (tests/python/hf_models.py)

VOCAB = 257            # the byte tokenizer's ids: bytes + EOS
EOS = 256
N_GREEDY = 64


def prompt_ids(n=131):
    text = ("Qwen3.5 interleaves Gated DeltaNet layers with gated full attention, "
            "and its norms add one to their stored weights. ") * 3
    return list(text.encode())[:n]


@torch.no_grad()
def greedy(model, prompt, n):
    """n greedy tokens through the model's own cache, one token per step."""
    out = model(torch.tensor([prompt]), use_cache=True)
    ids = [int(out.logits[0, -1].argmax())]
    cache = out.past_key_values
    while len(ids) < n:
        out = model(torch.tensor([[ids[-1]]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        ids.append(int(out.logits[0, -1].argmax()))
    return ids


def qwen3_5_text(**over):
    kw = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
              linear_value_head_dim=24, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
              max_position_embeddings=512, initializer_range=0.1, eos_token_id=EOS,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                               "partial_rotary_factor": 0.25})
    kw.update(over)
    return kw


def spread(model, tied):
    perturb(model, ("norm.weight", "layernorm.weight", "dt_bias", ".bias"), 0.2)
    scale(model, ("embed_tokens.weight", "embeddings.weight", "lm_head.weight"),
          2.0 if tied else 6.0)


def qwen3_5():
    """Qwen3_5ForConditionalGeneration as Qwen3.5-0.8B ships (text weights under
    model.language_model., a vision tower, text_config nested, tied head), with
    mRoPE's section set as released and a multi-token-prediction head beside."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    text = qwen3_5_text(tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                         "partial_rotary_factor": 0.25,
                                         "mrope_section": [1, 1, 0], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=32, intermediate_size=48, num_heads=2,
                  out_hidden_size=64, patch_size=4, temporal_patch_size=2,
                  num_position_embeddings=16)
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=True)
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    spread(model, tied=True)
    D = text["hidden_size"]
    mtp = {"mtp.fc.weight": torch.randn(D, 2 * D) * 0.1,
           "mtp.pre_fc_norm_embedding.weight": torch.randn(D) * 0.1,
           "mtp.pre_fc_norm_hidden.weight": torch.randn(D) * 0.1,
           "mtp.norm.weight": torch.randn(D) * 0.1,
           "mtp.layers.0.self_attn.q_proj.weight": torch.randn(2 * 4 * 16, D) * 0.1}
    return model, mtp


def qwen3_5_causal():
    """Qwen3_5ForCausalLM (text only, model. prefix): untied, biases on the
    attention, two value heads per key head, an explicit layer_types."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    cfg = Qwen3_5TextConfig(**qwen3_5_text(
        tie_word_embeddings=False, attention_bias=True, linear_num_value_heads=4,
        num_hidden_layers=5, layer_types=["linear_attention", "full_attention",
                                          "linear_attention", "linear_attention",
                                          "full_attention"]))
    model = Qwen3_5ForCausalLM(cfg).eval()
    spread(model, tied=False)
    return model, {}


def qwen3_5_moe():
    """Qwen3_5MoeForCausalLM: every layer a top-k MoE (renormalised) with a
    shared expert behind a sigmoid gate, as Qwen3.5-35B-A3B."""
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    kw = qwen3_5_text(tie_word_embeddings=False, linear_num_value_heads=4)
    kw.pop("intermediate_size")
    cfg = Qwen3_5MoeTextConfig(**kw, num_experts=6, num_experts_per_tok=2,
                               moe_intermediate_size=32, shared_expert_intermediate_size=40)
    model = Qwen3_5MoeForCausalLM(cfg).eval()
    spread(model, tied=False)
    # Routers start at zero in transformers: every expert tied. Spread them so
    # the top-k is decisive.
    perturb(model, ("mlp.gate.weight",), 1.0)
    return model, {}


def qwen3_next():
    """Qwen3NextForCausalLM: the fused, per-key-head-group interleaved GDN
    projections with two value heads per key head, MoE layers except the one
    mlp_only_layers names (a dense SwiGLU), the top k not renormalised."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    kw = qwen3_5_text(tie_word_embeddings=False, linear_num_value_heads=4)
    cfg = Qwen3NextConfig(**kw, num_experts=6, num_experts_per_tok=2, norm_topk_prob=False,
                          moe_intermediate_size=32, shared_expert_intermediate_size=40,
                          decoder_sparse_step=1, mlp_only_layers=[1])
    model = Qwen3NextForCausalLM(cfg).eval()
    spread(model, tied=False)
    perturb(model, ("mlp.gate.weight",), 1.0)
    return model, {}


def nemotron_h():
    """NemotronHForCausalLM with every dense layer kind of its pattern
    (Mamba-2, attention without positions, squared-ReLU MLP): E = heads x
    head_dim unlike expand x hidden, two B/C groups (so a grouped gated norm),
    an attention head_dim other than hidden / heads, biases on the Mamba
    projections and the MLPs, an untied head."""
    from transformers import NemotronHConfig, NemotronHForCausalLM
    cfg = NemotronHConfig(
        vocab_size=VOCAB, hidden_size=64, hybrid_override_pattern="M-*M-M*",
        num_attention_heads=4, num_key_value_heads=2, head_dim=12, intermediate_size=96,
        mlp_hidden_act="relu2", mlp_bias=True, mamba_num_heads=8, mamba_head_dim=12,
        n_groups=2, ssm_state_size=16, conv_kernel=4, use_conv_bias=True, use_bias=True,
        layer_norm_epsilon=1e-5, max_position_embeddings=512, initializer_range=0.1,
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    model = NemotronHForCausalLM(cfg).eval()
    spread(model, tied=False)
    perturb(model, ("A_log", ".D"), 0.3)
    return model, {}


def nemotron_h_moe_config(**over):
    """Nemotron-H with its MoE layers ('E'): sigmoid scores, a correction bias
    on them for the choice, groups searched topk_group at a time, the top k
    renormalised and scaled, squared-ReLU experts and a shared expert."""
    from transformers import NemotronHConfig
    kw = dict(vocab_size=VOCAB, hidden_size=64, hybrid_override_pattern="ME*M-E",
              num_attention_heads=4, num_key_value_heads=2, head_dim=12, intermediate_size=96,
              mlp_hidden_act="relu2", mlp_bias=False, mamba_num_heads=8, mamba_head_dim=12,
              n_groups=2, ssm_state_size=16, conv_kernel=4, use_conv_bias=True, use_bias=False,
              n_routed_experts=8, num_experts_per_tok=3, moe_intermediate_size=32,
              moe_shared_expert_intermediate_size=40, n_group=4, topk_group=2,
              norm_topk_prob=True, routed_scaling_factor=2.5,
              layer_norm_epsilon=1e-5, max_position_embeddings=512, initializer_range=0.1,
              tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    kw.update(over)
    return NemotronHConfig(**kw)


def nemotron_h_moe_model(cfg):
    from transformers import NemotronHForCausalLM
    model = NemotronHForCausalLM(cfg).eval()
    spread(model, tied=False)
    perturb(model, ("A_log", ".D"), 0.3)
    # Routers and the correction bias start at zero: spread them so that the
    # choice is decisive and the bias changes it.
    perturb(model, ("mixer.gate.weight",), 1.0)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buf.add_(0.3 * torch.randn_like(buf))
    return model


def nemotron_h_moe():
    """NemotronHForCausalLM with MoE layers, four groups of two experts, the
    best two groups searched for three experts."""
    return nemotron_h_moe_model(nemotron_h_moe_config()), {}


def nemotron_h_moe_latent():
    """The same with the latent projections (moe_latent_size), one group, the
    top k not renormalised."""
    return nemotron_h_moe_model(nemotron_h_moe_config(
        moe_latent_size=24, n_group=1, topk_group=1, norm_topk_prob=False,
        routed_scaling_factor=1.5, num_experts_per_tok=2)), {}


def granite_4_h_moe():
    """GraniteMoeHybridForCausalLM with experts (num_local_experts > 0): the top
    2 of 6 SwiGLU experts beside the shared MLP, all under residual_multiplier."""
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM
    cfg = GraniteMoeHybridConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=32, shared_intermediate_size=40,
        num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "mamba"],
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=6,
        num_experts_per_tok=2, embedding_multiplier=1.5, residual_multiplier=0.6,
        attention_multiplier=0.5, logits_scaling=0.5, position_embedding_type="nope",
        mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
        mamba_chunk_size=64, mamba_conv_bias=True, mamba_proj_bias=False, rms_norm_eps=1e-6,
        max_position_embeddings=512, initializer_range=0.1, tie_word_embeddings=False,
        eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    model = GraniteMoeHybridForCausalLM(cfg).eval()
    spread(model, tied=False)
    perturb(model, ("A_log", ".D"), 0.3)
    perturb(model, ("router.weight", "router.layer.weight"), 1.0)
    return model, {}


def granite_4_h():
    """GraniteMoeHybridForCausalLM as Granite-4.0-H's dense models: Mamba-2 and
    attention without RoPE, the shared MLP only (no experts), the four scalars
    set away from 1 and from one another, two B/C groups, tied embeddings."""
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM
    cfg = GraniteMoeHybridConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, shared_intermediate_size=80,
        num_hidden_layers=5, layer_types=["mamba", "attention", "mamba", "mamba", "attention"],
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=0,
        embedding_multiplier=1.5, residual_multiplier=1.8, attention_multiplier=0.5,
        logits_scaling=0.5, position_embedding_type="nope", mamba_n_heads=8,
        mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
        mamba_chunk_size=64, mamba_conv_bias=True, mamba_proj_bias=False, rms_norm_eps=1e-6,
        max_position_embeddings=512, initializer_range=0.1, tie_word_embeddings=True,
        eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    model = GraniteMoeHybridForCausalLM(cfg).eval()
    spread(model, tied=True)
    perturb(model, ("A_log", ".D"), 0.3)
    return model, {}


def granite_4_h_rope():
    """The same with what the released dense configs may also set: RoPE
    (position_embedding_type "rope"), biases on the attention and the Mamba
    projections, one B/C group, an untied head."""
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM
    cfg = GraniteMoeHybridConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, shared_intermediate_size=72,
        num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "attention"],
        num_attention_heads=4, num_key_value_heads=1, num_local_experts=0,
        embedding_multiplier=2.0, residual_multiplier=0.7, attention_multiplier=0.4,
        logits_scaling=1.6, position_embedding_type="rope",
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0}, attention_bias=True,
        mamba_n_heads=4, mamba_n_groups=1, mamba_d_state=12, mamba_d_conv=3, mamba_expand=1,
        mamba_chunk_size=32, mamba_conv_bias=True, mamba_proj_bias=True, rms_norm_eps=1e-5,
        max_position_embeddings=512, initializer_range=0.1, tie_word_embeddings=False,
        eos_token_id=EOS, bos_token_id=1, pad_token_id=0)
    model = GraniteMoeHybridForCausalLM(cfg).eval()
    spread(model, tied=False)
    perturb(model, ("A_log", ".D"), 0.3)
    return model, {}


def falcon_h1_config(**over):
    """Every µP multiplier away from 1 (MODELS.md 16.2's example values where it
    has them), head_dim unlike hidden_size / heads, mamba_d_ssm unlike
    expand x hidden_size."""
    from transformers import FalconH1Config
    kw = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, head_dim=24, mamba_d_ssm=96,
              mamba_n_heads=4, mamba_d_head="auto", mamba_n_groups=2, mamba_d_state=16,
              mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, rms_norm_eps=1e-5,
              max_position_embeddings=512, initializer_range=0.1, eos_token_id=EOS,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
              embedding_multiplier=5.657, key_multiplier=0.391, lm_head_multiplier=0.0391,
              ssm_in_multiplier=1.25, ssm_out_multiplier=0.2357, attention_in_multiplier=0.8,
              attention_out_multiplier=1.3, mlp_multipliers=[0.884, 0.586],
              ssm_multipliers=[0.354, 0.25, 0.354, 0.5, 0.354])
    kw.update(over)
    return FalconH1Config(**kw)


def falcon_h1_model(cfg, head_scale, embed_scale):
    from transformers import FalconH1ForCausalLM
    model = FalconH1ForCausalLM(cfg).eval()
    perturb(model, ("norm.weight", "layernorm.weight", "dt_bias", ".bias", ".D"), 0.2)
    # lm_head_multiplier 0.0391 shrinks the logits; the head makes up for it.
    scale(model, ("lm_head.weight",), head_scale)
    scale(model, ("embed_tokens.weight",), embed_scale)
    return model


def falcon_h1():
    """FalconH1ForCausalLM with the grouped gated norm, norm before the gate
    (mamba_rms_norm true, the released models' setting), untied."""
    return falcon_h1_model(falcon_h1_config(mamba_rms_norm=True, mamba_norm_before_gate=True),
                           150.0, 2.0), {}


def falcon_h1_gate_first():
    """FalconH1ForCausalLM with mamba_norm_before_gate false: the gate, then the
    grouped norm, as mamba_ssm's Mamba-2 orders them."""
    return falcon_h1_model(falcon_h1_config(mamba_rms_norm=True, mamba_norm_before_gate=False),
                           150.0, 2.0), {}


def falcon_h1_nonorm():
    """FalconH1ForCausalLM as the class defaults it: no gated norm (o = y ⊙ SiLU(z)),
    with every bias on (attention, Mamba in_proj, both out projections). A tied
    head on these tiny random weights repeats one token, so this one is untied
    too."""
    cfg = falcon_h1_config(mamba_rms_norm=False, attention_bias=True, mamba_proj_bias=True,
                           projectors_bias=True, mamba_n_groups=1)
    return falcon_h1_model(cfg, 150.0, 2.0), {}




MODELS = {"qwen3_5": qwen3_5, "qwen3_5_causal": qwen3_5_causal, "qwen3_5_moe": qwen3_5_moe,
          "qwen3_next": qwen3_next, "nemotron_h": nemotron_h, "nemotron_h_moe": nemotron_h_moe,
          "nemotron_h_moe_latent": nemotron_h_moe_latent, "granite_4_h": granite_4_h,
          "granite_4_h_moe": granite_4_h_moe,
          "granite_4_h_rope": granite_4_h_rope, "falcon_h1": falcon_h1,
          "falcon_h1_gate_first": falcon_h1_gate_first, "falcon_h1_nonorm": falcon_h1_nonorm}


def write(name):
    torch.manual_seed(sum(map(ord, name)))
    model, extra = MODELS[name]()
    model.config._attn_implementation = "eager"
    out = HERE / name
    model.save_pretrained(out / "hf", safe_serialization=True)
    if extra:
        path = out / "hf" / "model.safetensors"
        tensors = load_file(path)
        tensors.update({k: v.contiguous() for k, v in extra.items()})
        save_file(tensors, path, metadata={"format": "pt"})
    prompt = prompt_ids()
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0].float().numpy()
    ids = greedy(model, prompt, N_GREEDY)
    assert logits[-1].std() > 1.0 and len(set(ids)) > 4, (name, logits[-1].std(), ids)
    np.save(out / "logits.npy", logits.astype(np.float32))
    (out / "golden.json").write_text(json.dumps(
        {"architecture": type(model).__name__, "prompt": prompt, "greedy": ids,
         "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]},
        indent=1) + "\n")
    print(f"{name}: {type(model).__name__}, logits {logits.shape}, greedy {ids[:8]}...")


if __name__ == "__main__":
    for name in sys.argv[1:] or MODELS:
        write(name)

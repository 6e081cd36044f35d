"""The engine's sink + rolling-window attention equals the float64 reference.

The reference (weights/reference/attention.py) replays StreamingLLM's per-token
cache rule literally (trim to first S + last W, rotate every cached key with its
index in the cache); the engine uses a ring buffer, closed-form cache positions
and a RoPE table. Sequences are many times longer than sinks + window, so
eviction, ring wrap-around and position reuse are all exercised, step by step
and with chunked prefill (chunks shorter and longer than the window).
"""

import subprocess

import numpy as np
import pytest
import torch

from weights.reference import logits as ref_logits
from weights.reference.random_attention import attention_block, make_random_stack, mamba_block
from engine_run import run_engine, tokens

MODELS = {
    # Llama-style GQA with RoPE and attention sinks.
    "gqa_rope_sinks": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16),
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                        rope_theta=500000.0)]),
    # SPADE-style local attention: no sinks; one block without positions
    # (LayerNorm pre-norm), one with RoPE; plain multi-head.
    "sliding_window": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=4, head_dim=8, sinks=0, window=11, pos="none",
                        norm="layernorm"),
        attention_block(n_heads=4, n_kv_heads=4, head_dim=8, sinks=0, window=11)]),
    # Every bias on, an untied head, odd group count, RoPE with head_dim 6.
    "biases_untied": dict(blocks=[
        attention_block(n_heads=6, n_kv_heads=3, head_dim=6, sinks=2, window=5,
                        qkv_bias=True, o_bias=True),
        attention_block(n_heads=6, n_kv_heads=2, head_dim=6, sinks=1, window=9,
                        qkv_bias=True, o_bias=True)], tie_embeddings=False),
    # Every rope_scaling type, with eviction. Pairs of head_dim 8 at θ 1e4 have
    # wavelengths 6, 63, 628 and 6283: llama3 (64 / 4 .. 64 / 1) keeps the
    # first, blends the second and divides the last two; yarn's correction
    # range over 64 positions is pairs 0 .. 2. dynamic's bound is exactly
    # sinks + window + 1, so it must act as plain RoPE.
    "scaled_rope": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                        rope_scaling={"type": "linear", "factor": 2.5}),
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                        rope_scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64}),
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                        rope_scaling={"type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 64,
                                      "beta_fast": 32.0, "beta_slow": 1.0,
                                      "attention_factor": 1.3}),
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                        rope_scaling={"type": "dynamic", "factor": 4.0,
                                      "max_position_embeddings": 21})]),
    # Partial rotary (Bamba, GPT-NeoX): 4 of head_dim 12 rotated, pairs (j, j + 2),
    # which the engine must line up with its (i, i + 6) pairing; then half of 16
    # under yarn, whose attention factor scales the rotated channels only, with
    # biases on q and k (reordered alike).
    "partial_rotary": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=2, head_dim=12, sinks=4, window=16,
                        rotary_dim=4),
        attention_block(n_heads=2, n_kv_heads=2, head_dim=16, sinks=2, window=20,
                        rotary_dim=8, qkv_bias=True,
                        rope_scaling={"type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 64,
                                      "beta_fast": 32.0, "beta_slow": 1.0,
                                      "attention_factor": 1.3})]),
    # Qwen3.5's gated attention: per-head q/k RMSNorm before a quarter-head RoPE
    # (its weights must follow q and k into the engine's RoPE order), a sigmoid
    # gate on every head's output; then the same with biases on q, gate, k, v.
    "gated_qk_norm": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=2, head_dim=16, sinks=4, window=16,
                        rotary_dim=4, rope_theta=1e7, eps=1e-6,
                        qk_norm={"type": "rmsnorm", "eps": 1e-6}, out_gate="sigmoid"),
        attention_block(n_heads=2, n_kv_heads=1, head_dim=12, sinks=2, window=9,
                        qkv_bias=True, qk_norm={"type": "rmsnorm", "eps": 1e-5},
                        out_gate="sigmoid")]),
    # Granite-4.0-H's attention: no positions, a softmax scale in place of
    # 1/sqrt(d_h), its residual add scaled (by 1 in the second block, so both
    # of the layer's paths to the residual run); eviction as everywhere.
    "granite_scales": dict(blocks=[
        attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16, pos="none",
                        scale=0.9, residual_scale=1.7),
        mamba_block(),
        attention_block(n_heads=2, n_kv_heads=1, head_dim=16, sinks=2, window=9, pos="none",
                        scale=0.05, residual_scale=1.0)]),
    # A hybrid stack: mamba1 and multi-query attention interleaved.
    "mixed_mamba": dict(blocks=[
        mamba_block(),
        attention_block(n_heads=4, n_kv_heads=1, head_dim=8, sinks=4, window=16),
        mamba_block(d_inner=48, d_state=4, d_conv=3, dt_rank=3),
        attention_block(n_heads=2, n_kv_heads=2, head_dim=16, sinks=4, window=16)]),
}


def reference(tmp_path, model, toks):
    ref = tmp_path / "ref.npy"
    assert ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)),
                            "--out", str(ref), "--float64"]) == 0
    return np.load(ref)


def cache_bytes(blocks):
    """Per-slot bytes of the attention blocks' caches: [count | K | V] (attention_math.h),
    each at a 256-byte-aligned offset of the slot (slot_arena.h)."""
    return sum(aligned(16 + 2 * b["n_kv_heads"] * (b["sinks"] + b["window"]) * b["head_dim"] * 4)
               for b in blocks if b["kind"] == "attention")


def aligned(n):
    return (n + 255) // 256 * 256


@pytest.mark.parametrize("name", sorted(MODELS))
def test_step_by_step_logits_match_full_sequence_reference(tmp_path, engine_logits, name):
    model = tmp_path / "model"
    make_random_stack(model, seed=11, **MODELS[name])
    toks = tokens(256, seed=1)
    expected = reference(tmp_path, model, toks)
    got = run_engine(engine_logits, model, toks, tmp_path / "step.npy", chunk=1)
    assert got.shape == expected.shape == (256, 264)
    err = np.abs(got - expected).max()
    assert err <= 1e-4, f"{name}: max abs error {err}"
    assert expected.std() > 0.1


@pytest.mark.parametrize("name", ["gqa_rope_sinks", "mixed_mamba", "sliding_window",
                                  "scaled_rope", "partial_rotary", "gated_qk_norm",
                                  "granite_scales"])
@pytest.mark.parametrize("chunk", [7, 64, 256])
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, name, chunk):
    model = tmp_path / "model"
    make_random_stack(model, seed=5, **MODELS[name])
    toks = tokens(256, seed=2)
    step = run_engine(engine_logits, model, toks, tmp_path / "a.npy", 1, tmp_path / "a.state")
    chunked = run_engine(engine_logits, model, toks, tmp_path / "b.npy", chunk,
                         tmp_path / "b.state")
    assert np.abs(step - chunked).max() <= 1e-5
    sa = np.fromfile(tmp_path / "a.state", dtype=np.uint8)
    sb = np.fromfile(tmp_path / "b.state", dtype=np.uint8)
    assert sa.size == sb.size > 0
    # The token counts (int64 headers) are bitwise equal; the cached K/V close.
    fa, fb = sa.view(np.float32), sb.view(np.float32)
    assert np.abs(fa - fb).max() <= 1e-5


def test_ten_times_the_cache_matches_reference_with_constant_memory(tmp_path, engine_logits):
    """At 10x (sinks + window) tokens the logits equal the reference that recomputes
    attention over exactly the sinks + window with cache positions, the state size
    does not depend on the length, and the cache holds exactly those keys."""
    blk = attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=4, window=16,
                          qkv_bias=True)
    config, tensors = make_random_stack(tmp_path / "model", seed=9, blocks=[blk])
    S, W, Hkv, dh = 4, 16, 2, 8
    n_long = 10 * (S + W) + 37          # also not a multiple of the window
    toks = tokens(n_long, seed=3)

    short = run_engine(engine_logits, tmp_path / "model", toks[:S + 3], tmp_path / "s.npy", 1,
                       tmp_path / "s.state")
    assert short.shape[0] == S + 3
    got = run_engine(engine_logits, tmp_path / "model", toks, tmp_path / "l.npy", 1,
                     tmp_path / "l.state")
    expected = reference(tmp_path, tmp_path / "model", toks)
    assert np.abs(got - expected).max() <= 1e-4

    short_state = np.fromfile(tmp_path / "s.state", dtype=np.uint8)
    long_state = np.fromfile(tmp_path / "l.state", dtype=np.uint8)
    assert short_state.size == long_state.size == cache_bytes([blk])

    # The first block's input is the embedding, so its un-rotated keys are
    # W_k RMSNorm(embed[tok]) + b_k. The cache must hold those of tokens 0..S-1
    # and of the last W tokens, in ring order, and nothing else.
    assert long_state[:8].view(np.int64)[0] == n_long
    cache = long_state[16:].view(np.float32)
    k_cache = cache[:Hkv * (S + W) * dh].reshape(Hkv, S + W, dh)
    t = {k: v.double() for k, v in tensors.items()}
    x = t["embed.weight"][torch.tensor(toks)]
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * t["blocks.0.norm.weight"]
    keys = (x @ t["blocks.0.attn.k.weight"].T + t["blocks.0.attn.k.bias"]).reshape(-1, Hkv, dh)
    kept = list(range(S)) + list(range(n_long - W, n_long))
    for tk in kept:
        row = tk if tk < S else S + (tk - S) % W
        assert np.abs(k_cache[:, row] - keys[tk].numpy()).max() <= 1e-4, tk


def test_chunk_longer_than_cache_evicts_like_decode(tmp_path, engine_logits):
    """A 256-token first chunk into a 6-entry cache (the whole window turns over
    inside one step) against the reference."""
    blk = attention_block(n_heads=2, n_kv_heads=1, head_dim=8, sinks=1, window=5)
    make_random_stack(tmp_path / "model", seed=4, blocks=[blk, dict(blk)])
    toks = tokens(256, seed=6)
    got = run_engine(engine_logits, tmp_path / "model", toks, tmp_path / "c.npy", 256)
    assert np.abs(got - reference(tmp_path, tmp_path / "model", toks)).max() <= 1e-4


@pytest.mark.parametrize("field,value,message", [
    ("n_kv_heads", 3, "n_kv_heads"),
    ("head_dim", 7, "head_dim"),
    ("window", 0, "window"),          # with sinks 0: an empty cache
    ("rope_scaling", {"type": "longrope", "factor": 2.0}, "type"),
    ("rope_scaling", {"type": "linear"}, "factor"),
    ("rotary_dim", 7, "rotary_dim"),  # odd: no pairing
    ("rotary_dim", 10, "rotary_dim"),
    ("pos", "t5_bucket", "pos"),
    ("rel_bias", {"buckets": 32}, "rel_bias"),
    ("sinks", -1, "sinks"),
    ("out_gate", "swish", "out_gate"),
    ("qk_norm", {"type": "layernorm", "eps": 1e-6}, "qk_norm"),
])
def test_bad_config_is_rejected_naming_the_field(tmp_path, engine_logits, field, value, message):
    import json
    blk = attention_block(n_heads=4, n_kv_heads=2, head_dim=8, sinks=0, window=4)
    make_random_stack(tmp_path / "model", seed=1, blocks=[blk])
    path = tmp_path / "model" / "config.json"
    cfg = json.loads(path.read_text())
    cfg["blocks"][0][field] = value
    path.write_text(json.dumps(cfg))
    proc = subprocess.run([str(engine_logits), "--model", str(tmp_path / "model"),
                           "--tokens", "1,2", "--out", str(tmp_path / "x.npy")],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "blocks[0] (attention)" in proc.stderr and f'"{message}"' in proc.stderr, proc.stderr

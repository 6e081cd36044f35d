"""Converted checkpoints of the architectures transformers 4.48.3 predates give
the numbers a current transformers gives.

tests/data/hf_golden/NAME/ holds a tiny random checkpoint that transformers
itself initialised and saved (save_pretrained, fp32), its logits over a
131-token prompt and 64 greedy tokens from its own cached generation loop,
written by tests/data/hf_golden/make.py in the environment
deploy/setup_hf.sh creates (golden.json names the versions). Here the
checkpoint is converted with `python -m weights.convert` and run by the C++
engine with a cache that holds the whole stream (nothing evicted, so the engine
must equal transformers' full attention): logits within 1e-3 prefilled in
chunks of 32 and 29 tokens (neither divides the prompt, nor transformers' GDN
and Mamba-2 chunks of 64 and 128), and the 64 greedy tokens identical.
"""

import json
import pathlib
import shutil

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from safetensors.torch import load_file as load_torch
from safetensors.torch import save_file

from weights.reference.model import ReferenceModel

from engine_run import convert, engine_greedy, run_engine

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "data" / "hf_golden"
SOURCES = {"Qwen3_5ForConditionalGeneration": "hf-qwen3_5", "Qwen3_5ForCausalLM": "hf-qwen3_5",
           "Qwen3_5MoeForCausalLM": "hf-qwen3_5", "Qwen3NextForCausalLM": "hf-qwen3-next",
           "NemotronHForCausalLM": "hf-nemotron-h",
           "GraniteMoeHybridForCausalLM": "hf-granite-moe-hybrid",
           "FalconH1ForCausalLM": "hf-falcon-h1"}
NAMES = sorted(p.parent.name for p in GOLDEN.glob("*/golden.json"))


def golden(name):
    g = json.loads((GOLDEN / name / "golden.json").read_text())
    return g, np.load(GOLDEN / name / "logits.npy")


def converted(name, repo_root, tmp_path):
    g, _ = golden(name)
    out = tmp_path / "canonical"
    assert len(g["prompt"]) + len(g["greedy"]) <= 4 + 252   # nothing is evicted
    convert(repo_root, SOURCES[g["architecture"]], GOLDEN / name / "hf", out,
            "--sinks", "4", "--window", "252")
    return out


def test_every_golden_model_is_checked():
    assert {"qwen3_5", "qwen3_5_causal", "qwen3_5_moe", "qwen3_next", "nemotron_h",
            "nemotron_h_moe", "nemotron_h_moe_latent", "granite_4_h", "granite_4_h_rope",
            "granite_4_h_moe", "falcon_h1", "falcon_h1_gate_first",
            "falcon_h1_nonorm"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_logits_and_greedy_tokens_match_transformers(name, repo_root, tmp_path, engine_logits,
                                                     engine_generate):
    g, want = golden(name)
    out = converted(name, repo_root, tmp_path)
    assert want[-1].std() > 1.0      # spread logits: the comparison means something
    for chunk in (32, 29):
        got = run_engine(engine_logits, out, g["prompt"], tmp_path / "logits.npy", chunk)
        err = np.abs(got - want).max()
        print(f"{name} chunk {chunk}: {err:.2e}")
        assert err <= 1e-3, f"{name}, chunk {chunk}: max |engine - transformers| {err:.2e}"
    assert engine_greedy(engine_generate, out, g["prompt"], len(g["greedy"])) == g["greedy"]


def test_qwen3_5_keeps_its_mtp_head_verbatim_and_drops_the_vision_tower(repo_root, tmp_path):
    out = converted("qwen3_5", repo_root, tmp_path)
    config = json.loads((out / "config.json").read_text())
    assert config["mtp"] == {"layers": 1, "run": False, "file": "mtp.safetensors"}
    src = load_file(GOLDEN / "qwen3_5" / "hf" / "model.safetensors")
    kept = load_file(out / "mtp.safetensors")
    assert sorted(kept) == sorted(n for n in src if n.startswith("mtp."))
    for n, t in kept.items():
        assert np.array_equal(t, src[n]), n
    model = load_file(out / "model.safetensors")
    assert not any("visual" in n or n.startswith("mtp.") for n in model)
    # Qwen3.5's 1 + w norms are written as the canonical rmsnorm's weight.
    w = src["model.language_model.layers.3.self_attn.q_norm.weight"]
    assert np.allclose(model["blocks.6.attn.q_norm.weight"], 1 + w)
    assert config["blocks"][6]["rotary_dim"] == 4 and config["blocks"][6]["rope_theta"] == 1e7


def test_falcon_h1_tied_head_scales_only_the_input_embedding(repo_root, tmp_path, engine_logits):
    """embed.scale (embedding_multiplier) scales the embedding read, not the tied head;
    logit_scale (lm_head_multiplier) the logits: the engine against the float64
    reference on falcon_h1 with its head tied (no golden: tied, these random weights
    greedily repeat one token)."""
    src = pathlib.Path(shutil.copytree(GOLDEN / "falcon_h1" / "hf", tmp_path / "hf"))
    cfg = json.loads((src / "config.json").read_text())
    cfg["tie_word_embeddings"] = True
    (src / "config.json").write_text(json.dumps(cfg))
    t = load_torch(src / "model.safetensors")
    t.pop("lm_head.weight")
    save_file(t, src / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "canonical"
    convert(repo_root, "hf-falcon-h1", src, out, "--sinks", "4", "--window", "252")
    config = json.loads((out / "config.json").read_text())
    assert config["tie_embeddings"] and config["embed"]["scale"] == 5.657
    prompt = json.loads((GOLDEN / "falcon_h1" / "golden.json").read_text())["prompt"]
    want = ReferenceModel.load(out, torch.float64).forward(prompt).numpy()
    got = run_engine(engine_logits, out, prompt, tmp_path / "logits.npy", 32)
    # Small logits (0.0391 x a head of unit rows), so the bound is relative:
    # a head scaled by embed.scale would be off by a factor of 5.657.
    assert want.std() > 0.01
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"falcon_h1 tied: relative error {err:.2e}")
    assert err <= 1e-4

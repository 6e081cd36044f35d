"""The bundled models under weights/models are valid, trained canonical models.

default/: the hybrid that uses every block kind the engine has.
mamba-baseline/: the pure Mamba-1 of about the same size trained on the same budget.
"""

import json
import math
import os

import pytest
import torch

from weights import canonical
from weights.reference.model import ReferenceModel
from weights.training import fortunes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODELS = os.path.join(ROOT, "weights", "models")
DEFAULT = os.path.join(MODELS, "default")
BASELINE = os.path.join(MODELS, "mamba-baseline")
ENGLISH = b"The best way to predict the future is to invent it.\n\t\t-- Alan Kay"
UNIGRAM_BITS = 4.783    # held-out bits/byte of the byte unigram on this corpus (TRAINING.md)


def _common_layout(model_dir):
    cfg, tensors, meta = canonical.load_model_dir(model_dir)
    assert cfg["vocab_size"] == canonical.BYTE_VOCAB and cfg["d_model"] == 128
    assert cfg["eos_token_id"] == fortunes.EOS and cfg["bos_token_id"] is None
    assert meta["converter"] == "weights.training.train_hybrid"
    assert all(t.dtype == torch.float32 for t in tensors.values())
    assert os.path.getsize(os.path.join(model_dir, "model.safetensors")) <= 8 * 1024 * 1024
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        assert json.load(f) == canonical.byte_tokenizer()
    return cfg, tensors


def _english_bits(model_dir):
    tokens = [fortunes.EOS] + list(ENGLISH)
    logits = ReferenceModel.load(model_dir, torch.float32).forward(tokens)
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(tokens[1:]))
    return nll.item() / math.log(2)


def test_default_model_layout_uses_every_kind():
    cfg, tensors = _common_layout(DEFAULT)
    assert cfg["name"] == "seqboat-hybrid-bytes"
    kinds = [b["kind"] for b in cfg["blocks"]]
    # Every kind the training code has (weights/training/train_hybrid.py); it has no Mamba-2,
    # Gated DeltaNet or Falcon-H1 parallel block, so the bundled model cannot hold one.
    untrained = {"mamba2", "gdn", "parallel_mamba2_attention"}
    assert set(kinds) == set(canonical.BLOCK_SHAPES) - untrained == {
        "mamba1", "seqboat", "attention", "moe", "s4d", "mlp"}
    by_kind = {b["kind"]: b for b in cfg["blocks"]}
    sb = by_kind["seqboat"]
    assert (sb["pos"], sb["attn_fn"], sb["prenorm"]) == ("rope_interleaved", "softmax", True)
    at = by_kind["attention"]
    assert at["sinks"] > 0 and at["n_kv_heads"] < at["n_heads"]      # sinks, GQA
    moe = by_kind["moe"]
    assert moe["routing"] == "top1_softmax" and moe["n_experts"] >= 2
    assert sum(t.numel() for t in tensors.values()) > 500_000
    with open(os.path.join(DEFAULT, "TRAINING.md")) as f:
        md = f.read()
    assert "held-out bits/byte" in md and "pure Mamba-1" in md


def test_default_model_predicts_english_far_better_than_unigram():
    bits = _english_bits(DEFAULT)
    assert bits < UNIGRAM_BITS - 1.0, bits


@pytest.mark.skipif(not os.path.isdir(BASELINE), reason="no baseline bundled")
def test_baseline_is_pure_mamba_of_about_the_same_size():
    cfg, tensors = _common_layout(BASELINE)
    _, default_tensors, _ = canonical.load_model_dir(DEFAULT)
    assert all(b["kind"] == "mamba1" for b in cfg["blocks"])
    n_base = sum(t.numel() for t in tensors.values())
    n_default = sum(t.numel() for t in default_tensors.values())
    assert abs(n_base - n_default) / n_default < 0.02
    assert _english_bits(BASELINE) < UNIGRAM_BITS - 1.0

"""The bundled model under weights/models/default is a valid, trained canonical model."""

import json
import math
import os

import torch

from weights import canonical, fortunes
from weights.reference.model import ReferenceModel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DEFAULT = os.path.join(ROOT, "weights", "models", "default")


def test_default_model_layout():
    cfg, tensors, meta = canonical.load_model_dir(DEFAULT)
    assert cfg["name"] == "seqboat-mamba-bytes" and cfg["vocab_size"] == 264
    assert cfg["eos_token_id"] == 256 and cfg["bos_token_id"] is None
    assert all(b["kind"] == "mamba1" for b in cfg["blocks"])
    assert meta["converter"].endswith("/hf-mamba")
    assert os.path.getsize(os.path.join(DEFAULT, "model.safetensors")) <= 8 * 1024 * 1024
    with open(os.path.join(DEFAULT, "tokenizer.json")) as f:
        assert json.load(f) == canonical.byte_tokenizer()
    assert os.path.exists(os.path.join(DEFAULT, "TRAINING.md"))


def test_default_model_predicts_english_far_better_than_unigram():
    text = b"The best way to predict the future is to invent it.\n\t\t-- Alan Kay"
    tokens = [fortunes.EOS] + list(text)
    logits = ReferenceModel.load(DEFAULT, torch.float32).forward(tokens)
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(tokens[1:]))
    bits = nll.item() / math.log(2)
    assert bits < 3.5, bits          # unigram is ~4.8 bits/byte on this corpus

"""`--source hf-mamba` on checkpoints written by transformers' own save_pretrained,
in every layout it writes: model.safetensors, pytorch_model.bin, and either
sharded behind an index. (test_convert.py checks the mapping itself against a
forward computed from hand-built checkpoints.)
"""

import json

import pytest
import torch

from weights import convert
from weights.converters.convert_error import ConvertError

import hf_layouts
import hf_models

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import MambaConfig, MambaForCausalLM  # noqa: E402

hf_models.stub_dynamo()


def make_model(seed=0, use_bias=True):
    torch.manual_seed(seed)
    cfg = MambaConfig(vocab_size=257, hidden_size=32, state_size=8, num_hidden_layers=3,
                      intermediate_size=64, conv_kernel=4, time_step_rank="auto",
                      use_bias=use_bias, use_conv_bias=True, layer_norm_epsilon=1e-5,
                      tie_word_embeddings=True, eos_token_id=256, bos_token_id=None)
    return MambaForCausalLM(cfg).eval()


@pytest.mark.parametrize("layout", sorted(hf_layouts.LAYOUTS))
def test_every_save_pretrained_layout_converts_alike(tmp_path, layout):
    hf_layouts.assert_layout_converts_alike(make_model(seed=4), tmp_path, "hf-mamba", layout)


def test_truncated_pytorch_bin(tmp_path):
    hf_layouts.assert_truncated_bin_fails(make_model(), tmp_path, "hf-mamba")


def test_shard_holding_a_tensor_the_index_puts_elsewhere(tmp_path):
    src = tmp_path / "hf"
    make_model().save_pretrained(src, safe_serialization=False, max_shard_size="20KB")
    index = src / "pytorch_model.bin.index.json"
    data = json.loads(index.read_text())
    wm = data["weight_map"]
    name = "backbone.layers.0.mixer.A_log"
    wm[name] = next(s for s in sorted(set(wm.values())) if s != wm[name])
    index.write_text(json.dumps(data))
    with pytest.raises(ConvertError, match="backbone.layers.0.mixer.A_log.* is not listed"):
        convert.convert("hf-mamba", str(src), str(tmp_path / "out"), byte_tokenizer=True)

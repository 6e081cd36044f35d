"""The float64 reference of Qwen3.5's MTP head (weights/reference/mtp.py): the
engine's test data (tests/data/tiny_qwen3_5_mtp/mtp_reference.json) is what it
computes now, its layer's tensors are the converter's mapping of the same
Hugging Face tensors, and its drafts follow its own logits."""

import json
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "data" / "tiny_qwen3_5_mtp"
sys.path.insert(0, str(TINY))

from make import reference  # noqa: E402
from weights.converters import hf_qwen3_5  # noqa: E402
from weights.lazy_tensor import Lazy  # noqa: E402
from weights.reference.model import ReferenceModel  # noqa: E402
from weights.reference.mtp import ReferenceMtp, load_mtp, mtp_blocks  # noqa: E402


def test_the_engines_reference_data_is_current():
    want = json.loads((TINY / "mtp_reference.json").read_text())
    got = reference(TINY)
    assert got["context"] == want["context"] and got["drafts"] == want["drafts"]
    diff = (torch.tensor(got["logits"]) - torch.tensor(want["logits"])).abs().max()
    assert diff <= 1e-6, diff


def test_the_layer_is_mapped_as_the_converter_maps_attention():
    config = json.loads((TINY / "config.json").read_text())
    mtp = load_mtp(TINY)
    _, attn, _, _ = mtp_blocks(config, mtp)
    blk = config["blocks"][6]
    dims = {"n_heads": blk["n_heads"], "head_dim": blk["head_dim"], "attn_bias": False}
    lazy = {k: Lazy.of(v) for k, v in mtp.items()}
    conv = hf_qwen3_5._map_attention(lambda n: lazy[n], lambda n: lazy[n],
                                     "mtp.layers.0.self_attn.", "", dims)
    for name, t in conv.items():
        # The converter rounds 1 + w to fp32.
        assert torch.allclose(t().double(), attn[name], rtol=0, atol=1e-7), name


def test_drafts_follow_the_heads_own_logits():
    model = ReferenceModel.load(TINY, torch.float64)
    mtp = ReferenceMtp(model, load_mtp(TINY))
    context = list(b"abcabcab")
    logits = mtp.context_logits(context)
    drafts = mtp.drafts(context, 3)
    assert drafts[0] == int(torch.argmax(logits[-1]))
    # The second draft is the head run one position on, fed its own output.
    _, g = mtp.run(model.hidden(context)[:-1], context[1:])
    h = torch.cat([model.hidden(context)[:-1], g[-1:]])
    logits2, _ = mtp.run(h, context[1:] + [drafts[0]])
    assert drafts[1] == int(torch.argmax(logits2[-1]))

"""The tensor set of a Hugging Face checkpoint directory, read and checked.

    tensors = load_tensors(src)
    check_tensors(tensors, want, embed_name, tied)

load_tensors reads what save_pretrained writes: model.safetensors, the shards
listed in model.safetensors.index.json, pytorch_model.bin, or the shards listed
in pytorch_model.bin.index.json (safetensors first). Pickled files go through
torch.load(weights_only=True), which refuses anything but tensors and plain
containers.
"""

import json
import os

import torch

from weights.converters.hf_mamba import load_tensors as load_safetensors
from weights.converters.mamba_common import ConvertError

HEAD = "lm_head.weight"


def _load_bin(path):
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:                  # pickle errors come in many types
        raise ConvertError(f"{path}: cannot be read as a state dict: {e}") from None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise ConvertError(f"{path}: not a flat state dict of tensors")
    return dict(sd)


def load_tensors(src):
    """{name: tensor} of the checkpoint in directory `src`."""
    if os.path.exists(os.path.join(src, "model.safetensors")) or \
            os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        return load_safetensors(src)
    single = os.path.join(src, "pytorch_model.bin")
    index = os.path.join(src, "pytorch_model.bin.index.json")
    if os.path.exists(single):
        return _load_bin(single)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            part = _load_bin(os.path.join(src, shard))
            for k in part:
                if weight_map.get(k) != shard:
                    raise ConvertError(f"tensor {k!r} in {shard} is not listed there by the index")
            tensors.update(part)
        return tensors
    raise ConvertError(f"{src}: no model.safetensors, pytorch_model.bin (or index) found")


def check_tensors(tensors, want, embed_name, tied):
    """Every tensor of `want` ({name: shape}) present with its shape, nothing
    unknown, all floating point; lm_head.weight required unless tied, and equal
    to the embedding when present although tied. Errors name the tensor."""
    for name in sorted(want):
        if name not in tensors:
            raise ConvertError(f"missing tensor {name!r}")
        got = tuple(tensors[name].shape)
        if got != tuple(want[name]):
            raise ConvertError(f"tensor {name!r}: shape {list(got)}, expected {list(want[name])}")
    head = tuple(want[embed_name])
    for name in sorted(tensors):
        if name in want:
            continue
        if name != HEAD:
            raise ConvertError(f"unknown tensor {name!r}")
        if tuple(tensors[name].shape) != head:
            raise ConvertError(f"tensor {HEAD!r}: shape {list(tensors[name].shape)}, "
                               f"expected {list(head)}")
    if not tied and HEAD not in tensors:
        raise ConvertError(f"missing tensor {HEAD!r} (embeddings are not tied)")
    if tied and HEAD in tensors and not torch.equal(tensors[HEAD].float(),
                                                   tensors[embed_name].float()):
        raise ConvertError(f"tensor {HEAD!r} differs from the embedding although the "
                           "config ties them")
    for name in sorted(tensors):
        if not tensors[name].is_floating_point():
            raise ConvertError(f"tensor {name!r}: dtype {tensors[name].dtype} is not "
                               "floating point")

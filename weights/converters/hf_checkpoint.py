"""The tensor set of a Hugging Face checkpoint directory, read and checked.

    tensors = load_tensors(src)
    check_tensors(tensors, want, embed_name, tied)

load_tensors reads what save_pretrained writes: model.safetensors, the shards
listed in model.safetensors.index.json, pytorch_model.bin, or the shards listed
in pytorch_model.bin.index.json (safetensors first, as transformers prefers
it). Pickled files go through torch.load(weights_only=True), which refuses
anything but tensors and plain containers.
"""

import json
import os

import torch

from weights import safetensors_io
from weights.converters.convert_error import ConvertError

HEAD = "lm_head.weight"


def _load_safetensors(path):
    return safetensors_io.load_file(path)[0]


def load_bin(path):
    """The flat {name: tensor} state dict a torch.save'd .bin file holds."""
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:                  # pickle errors come in many types
        raise ConvertError(f"{path}: cannot be read as a state dict: {e}") from None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise ConvertError(f"{path}: not a flat state dict of tensors")
    return dict(sd)


# (single file, index of shards, reader), in the order transformers looks for them.
_LAYOUTS = (("model.safetensors", "model.safetensors.index.json", _load_safetensors),
            ("pytorch_model.bin", "pytorch_model.bin.index.json", load_bin))


def _load_sharded(src, index, load):
    """The union of the shards `index` lists; a tensor found in a shard the index
    does not assign it to is an error, so that two shards never both supply it."""
    with open(index) as f:
        weight_map = json.load(f).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ConvertError(f"{index}: no 'weight_map' object")
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        part = load(os.path.join(src, shard))
        for k in part:
            if weight_map.get(k) != shard:
                raise ConvertError(f"tensor {k!r} in {shard} is not listed there by the index")
        tensors.update(part)
    return tensors


def load_tensors(src):
    """{name: tensor} of the checkpoint in directory `src`."""
    for single, index, load in _LAYOUTS:
        if os.path.exists(os.path.join(src, single)):
            return load(os.path.join(src, single))
        if os.path.exists(os.path.join(src, index)):
            return _load_sharded(src, os.path.join(src, index), load)
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


def matrices(tensors, dtype):
    """name -> tensors[name] in `dtype`, contiguous: how converters write matrices."""
    return lambda name: tensors[name].to(dtype).contiguous()


def map_ends(mat, embed_name, final_norm_name, tied):
    """The canonical tensors around the blocks: the embedding, the final norm's
    weight and, unless tied, lm_head.weight (`mat`: matrices())."""
    out = {"embed.weight": mat(embed_name), "final_norm.weight": mat(final_norm_name)}
    if not tied:
        out["lm_head.weight"] = mat(HEAD)
    return out

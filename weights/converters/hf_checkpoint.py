"""The tensor set of a Hugging Face checkpoint directory, read lazily and checked.

    tensors = load_tensors(src)            # {name: Lazy}; nothing read yet
    check_tensors(tensors, want, embed_name, tied)
    mat = matrices(tensors, dtype)         # name -> Lazy of the tensor in dtype

load_tensors reads what save_pretrained writes: model.safetensors, the shards
listed in model.safetensors.index.json, pytorch_model.bin, or the shards listed
in pytorch_model.bin.index.json (safetensors first, as transformers prefers
it). Only headers (and .bin pickles) are read up front; every value is a Lazy
(weights/lazy_tensor.py) that reads its tensor from its shard when the writer
asks for it, so a converter that maps Lazy to Lazy converts a checkpoint of any
size in the memory of a few tensors. Pickled files are unpickled by
torch_zip.py, which, like torch.load(weights_only=True), refuses anything but
tensors and plain containers; the legacy pre-zip format goes through
torch.load(weights_only=True) itself, whole.
"""

import json
import os
import zipfile

import torch

from weights import safetensors_io
from weights.converters import torch_zip
from weights.converters.convert_error import ConvertError
from weights.lazy_tensor import Lazy, lazy, lazy_dict, materialize

HEAD = "lm_head.weight"


def _load_safetensors(path):
    f = safetensors_io.open_file(path)
    return {name: f.lazy(name) for name in f.names()}


def load_bin(path):
    """The flat {name: Lazy} state dict a torch.save'd .bin file holds: read
    lazily from the zip format (torch_zip.py), whole through torch.load for
    the legacy format of torch < 1.6."""
    try:
        if zipfile.is_zipfile(path):
            sd = torch_zip.load(path)
        else:
            sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:                  # pickle errors come in many types
        raise ConvertError(f"{path}: cannot be read as a state dict: {e}") from None
    if not isinstance(sd, dict) or not all(isinstance(v, (Lazy, torch.Tensor))
                                           for v in sd.values()):
        raise ConvertError(f"{path}: not a flat state dict of tensors")
    return lazy_dict(sd)


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
    """{name: Lazy} of the checkpoint in directory `src`."""
    for single, index, load in _LAYOUTS:
        if os.path.exists(os.path.join(src, single)):
            return load(os.path.join(src, single))
        if os.path.exists(os.path.join(src, index)):
            return _load_sharded(src, os.path.join(src, index), load)
    raise ConvertError(f"{src}: no model.safetensors, pytorch_model.bin (or index) found")


def check_tensors(tensors, want, embed_name, tied):
    """Every tensor of `want` ({name: shape}) present with its shape, nothing
    unknown, all floating point; lm_head.weight required unless tied, and equal
    to the embedding when present although tied. Errors name the tensor.
    `tensors` maps names to tensors or Lazy; only the tied pair is read."""
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
    for name in sorted(tensors):
        if not tensors[name].dtype.is_floating_point:
            raise ConvertError(f"tensor {name!r}: dtype {tensors[name].dtype} is not "
                               "floating point")
    if tied and HEAD in tensors and not torch.equal(
            materialize(tensors[HEAD]).float(), materialize(tensors[embed_name]).float()):
        raise ConvertError(f"tensor {HEAD!r} differs from the embedding although the "
                           "config ties them")


def matrices(tensors, dtype):
    """name -> Lazy of tensors[name] in `dtype`: how converters write matrices."""
    return lambda name: lazy(tensors[name]).to(dtype)


def fp32(tensors):
    """name -> Lazy of tensors[name] in float32: how converters write the tensors
    canonical.FP32_SUFFIXES and ROUTER_SUFFIXES keep in full precision."""
    return matrices(tensors, torch.float32)


def map_ends(mat, embed_name, final_norm_name, tied):
    """The canonical tensors around the blocks: the embedding, the final norm's
    weight and, unless tied, lm_head.weight (`mat`: matrices())."""
    out = {"embed.weight": mat(embed_name), "final_norm.weight": mat(final_norm_name)}
    if not tied:
        out["lm_head.weight"] = mat(HEAD)
    return out

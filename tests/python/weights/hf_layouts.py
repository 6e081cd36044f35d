"""The layouts save_pretrained writes besides one model.safetensors, and the
checks that a converter reads each of them as it reads that one file; also the
broken files every HF converter must refuse alike, as they all read config.json
and the weights through weights/converters/hf_config.py and hf_checkpoint.py."""

import os

import pytest
import torch

from weights import convert, safetensors_io
from weights.converters.convert_error import ConvertError

from convert_cli import truncate

# 20KB is below the tiny test models' largest tensors, so each save has several shards.
LAYOUTS = {
    "sharded_safetensors": dict(safe_serialization=True, max_shard_size="20KB"),
    "pytorch_bin": dict(safe_serialization=False),
    "sharded_bin": dict(safe_serialization=False, max_shard_size="20KB"),
}


# {case: (edit of a save() directory, what the error must name)}
BROKEN_FILES = {
    "truncated_safetensors": (truncate, ["model.safetensors"]),
    "no_config": (lambda s: os.remove(s / "config.json"), ["no config.json"]),
    "no_weights": (lambda s: os.remove(s / "model.safetensors"),
                   ["no model.safetensors, pytorch_model.bin"]),
}


def save(model, path):
    """model.save_pretrained into path as one model.safetensors; returns path."""
    model.save_pretrained(path, safe_serialization=True)
    return path


def _converted(source, src, out):
    convert.convert(source, str(src), str(out), byte_tokenizer=True)
    return safetensors_io.load_file(out / "model.safetensors")[0]


def assert_layout_converts_alike(model, tmp_path, source, layout):
    """`model` saved in `layout` converts to exactly the tensors its
    model.safetensors save converts to."""
    base = save(model, tmp_path / "single")
    other = tmp_path / layout
    model.save_pretrained(other, **LAYOUTS[layout])
    names = set(os.listdir(other))
    assert "model.safetensors" not in names, names
    if "max_shard_size" in LAYOUTS[layout]:
        index = "model.safetensors.index.json" if LAYOUTS[layout]["safe_serialization"] \
            else "pytorch_model.bin.index.json"
        assert index in names, names
        assert len([n for n in names if n.endswith((".safetensors", ".bin"))]) > 1, names
    else:
        assert "pytorch_model.bin" in names, names
    want = _converted(source, base, tmp_path / "out_single")
    got = _converted(source, other, tmp_path / f"out_{layout}")
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name], want[name]), name


def assert_truncated_bin_fails(model, tmp_path, source):
    """A cut-off pytorch_model.bin is an error naming the file; nothing is written."""
    src = tmp_path / "bin"
    model.save_pretrained(src, safe_serialization=False)
    path = src / "pytorch_model.bin"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    out = tmp_path / "out"
    with pytest.raises(ConvertError, match="pytorch_model.bin: cannot be read as a state dict"):
        convert.convert(source, str(src), str(out), byte_tokenizer=True)
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".out")] == []

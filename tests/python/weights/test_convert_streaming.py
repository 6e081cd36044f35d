"""Conversion streams: a checkpoint converts in the memory of a few tensors, not
the model's, with the same bytes as out of memory; broken shards are errors
naming the file and the tensor; a terminal gets a progress bar, a pipe nothing.

The memory test builds a 4-shard Llama checkpoint of 264 MB (fp32, 16 MB
matrices; safetensors or pytorch_model.bin shards) and converts it in a child
process allowed 128 MB of allocations beyond its imports, and whose peak
resident memory (VmHWM) must stay within 64 MB of its resident memory after
them: holding the model even once exceeds both, streaming stays far below.
"""

import io
import json
import os
import subprocess
import sys

import pytest
import torch

from weights import convert, safetensors_io

from convert_cli import ROOT, assert_clean_failure, run

MB = 1 << 20

# hf-llama with D=1024, d_ff=4096: every MLP matrix is 16 MB in fp32, every
# attention matrix 4 MB, a decoder layer 64 MB; one shard per layer.
BIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1024,
       "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 4,
       "num_attention_heads": 8, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
       "max_position_embeddings": 4096, "tie_word_embeddings": False}


def llama_shapes(cfg):
    """{source name: (shape, canonical name)} of an hf-llama checkpoint, by layer (None: the ends)."""
    D, F_, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    layers = {None: {"model.embed_tokens.weight": ((V, D), "embed.weight"),
                     "model.norm.weight": ((D,), "final_norm.weight"),
                     "lm_head.weight": ((V, D), "lm_head.weight")}}
    for j in range(cfg["num_hidden_layers"]):
        s, a, m = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        layer = {s + "input_layernorm.weight": ((D,), a + "norm.weight"),
                 s + "post_attention_layernorm.weight": ((D,), m + "norm.weight")}
        for n in "qkvo":
            layer[s + f"self_attn.{n}_proj.weight"] = ((D, D), a + f"attn.{n}.weight")
        for n, shape in (("gate", (F_, D)), ("up", (F_, D)), ("down", (D, F_))):
            layer[s + f"mlp.{n}_proj.weight"] = (shape, m + f"mlp.{n}.weight")
        layers[j] = layer
    return layers


def write_sharded(src, cfg, seed=0, layout="safetensors"):
    """An hf-llama checkpoint in one shard per decoder layer (the ends in the
    first), safetensors or torch.save'd .bin, made one shard at a time; returns
    ({source name: canonical name}, {source name: shard})."""
    os.makedirs(src)
    (src / "config.json").write_text(json.dumps(cfg))
    g = torch.Generator().manual_seed(seed)
    layers = llama_shapes(cfg)
    n = cfg["num_hidden_layers"]
    weight_map, names = {}, {}
    for j in range(n):
        part = dict(layers[j], **(layers[None] if j == 0 else {}))
        tensors = {name: torch.randn(shape, generator=g) for name, (shape, _) in part.items()}
        if layout == "safetensors":
            shard = f"model-{j + 1:05d}-of-{n:05d}.safetensors"
            safetensors_io.save_file(tensors, src / shard, {"format": "pt"})
        else:
            shard = f"pytorch_model-{j + 1:05d}-of-{n:05d}.bin"
            torch.save(tensors, src / shard)
        weight_map.update({name: shard for name in part})
        names.update({name: canonical for name, (_, canonical) in part.items()})
    index = "model.safetensors.index.json" if layout == "safetensors" else \
        "pytorch_model.bin.index.json"
    (src / index).write_text(json.dumps({"weight_map": weight_map}))
    return names, weight_map


def _read_source(path):
    """name -> tensor of one source shard, read on demand on the test's side."""
    if path.suffix == ".safetensors":
        return safetensors_io.open_file(path).read
    return torch.load(path).__getitem__


def assert_output_is_source(src, out, names, weight_map):
    """hf-llama in f32 copies every matrix unchanged: each canonical tensor is
    its source tensor, bit for bit. Read one tensor at a time on both sides."""
    got = safetensors_io.open_file(out / "model.safetensors")
    assert sorted(got.names()) == sorted(names.values())
    for shard in sorted(set(weight_map.values())):
        read = _read_source(src / shard)
        for name in (n for n in names if weight_map[n] == shard):
            assert torch.equal(got.read(names[name]), read(name)), names[name]


# Run in a child so its peak RSS is the conversion's alone; the baseline is
# taken after the imports (torch alone is a few hundred MB). The child may also
# allocate no more than LIMIT beyond what it holds after them (RLIMIT_DATA
# counts private writable mappings, i.e. what malloc and numpy take; address
# space limits would trip over torch's reservations). One torch thread: a
# pool's thread stacks would count against the limit too.
LIMIT = 128 * MB
CHILD = """
import json, resource, sys
import torch
from weights import convert

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

torch.set_num_threads(1)
data = status("VmData") + int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_DATA, (data, data))
base = status("VmRSS")
code = convert.main(sys.argv[2:])
print(json.dumps({"code": code, "base": base, "peak": status("VmHWM")}))
"""


@pytest.mark.parametrize("layout", ["safetensors", "bin"])
def test_big_checkpoint_converts_in_the_memory_of_a_few_tensors(tmp_path, layout):
    src, out = tmp_path / "big", tmp_path / "out"
    names, weight_map = write_sharded(src, BIG, layout=layout)
    model = sum(os.path.getsize(src / s) for s in set(weight_map.values()))
    largest = BIG["hidden_size"] * BIG["intermediate_size"] * 4
    assert model > 260 * MB and largest == 16 * MB
    # Half the model: holding it once, as converting from memory must, fails.
    assert LIMIT < model / 2
    proc = subprocess.run([sys.executable, "-c", CHILD, str(LIMIT), "--source", "hf-llama",
                           str(src), str(out), "--byte-tokenizer"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.splitlines()[-1])
    assert r["code"] == 0, proc.stderr
    # The bound: four of the largest tensors (one read, one being written,
    # allocator slack); the model, 264 MB, is four times that.
    grew = r["peak"] - r["base"]
    assert grew < 4 * largest, (f"converting a {model / MB:.0f} MB checkpoint raised peak RSS "
                                f"by {grew / MB:.0f} MB")
    assert_output_is_source(src, out, names, weight_map)


SMALL = dict(BIG, vocab_size=264, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=4)


def test_sharded_checkpoint_streams_to_the_bytes_of_the_in_memory_writer(tmp_path, capsys):
    src, out = tmp_path / "small", tmp_path / "out"
    names, weight_map = write_sharded(src, SMALL)
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"], capsys)
    assert code == 0, err
    assert err == ""                    # not a terminal: no progress bar
    assert_output_is_source(src, out, names, weight_map)
    # The streamed file is byte for byte what serialize() makes of the tensors in memory.
    tensors, meta = safetensors_io.load_file(out / "model.safetensors")
    assert (out / "model.safetensors").read_bytes() == safetensors_io.serialize(tensors, meta)


def test_truncated_shard_is_an_error_naming_the_file_and_tensor(tmp_path, capsys):
    src, out = tmp_path / "small", tmp_path / "out"
    _, weight_map = write_sharded(src, SMALL)
    shard = src / "model-00002-of-00003.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[:len(data) - 100])
    code, err = run(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, str(shard), "model.layers.1.",
                         "outside the data buffer")


def test_shard_cut_after_it_was_opened_names_the_file_and_tensor(tmp_path):
    src = tmp_path / "small"
    _, weight_map = write_sharded(src, SMALL)
    path = src / "model-00001-of-00003.safetensors"
    f = safetensors_io.open_file(path)
    last = max(f.names(), key=lambda n: f._entries[n][3])
    os.truncate(path, os.path.getsize(path) - 4)
    with pytest.raises(safetensors_io.SafetensorsError) as e:
        f.read(last)
    assert str(path) in str(e.value) and repr(last) in str(e.value)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_terminal_gets_tensors_and_bytes_written(tmp_path, monkeypatch):
    tqdm = pytest.importorskip("tqdm", reason="installed by deploy/setup.sh")
    src, out = tmp_path / "small", tmp_path / "out"
    names, _ = write_sharded(src, SMALL)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert convert.main(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"]) == 0
    shown = term.getvalue()
    total = sum(4 * torch.Size(s).numel() for layer in llama_shapes(SMALL).values()
                for s, _ in layer.values())
    size = tqdm.tqdm.format_sizeof(total, "B", 1024)
    assert f"convert: {len(names)}/{len(names)} tensors, {size}/{size}" in shown, shown


def test_terminal_without_tqdm_converts_without_a_bar(tmp_path, monkeypatch):
    src, out = tmp_path / "small", tmp_path / "out"
    write_sharded(src, SMALL)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setitem(sys.modules, "tqdm", None)          # as if not installed
    assert convert.main(["--source", "hf-llama", str(src), str(out), "--byte-tokenizer"]) == 0
    assert term.getvalue() == ""
    assert (out / "model.safetensors").exists()

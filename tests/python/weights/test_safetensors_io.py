import json
import struct
import weakref

import numpy as np
import pytest
import torch

from weights import safetensors_io as st
from weights.lazy_tensor import Lazy, cat, stack


def sample():
    g = torch.Generator().manual_seed(1)
    return {
        "b.f32": torch.randn(3, 5, generator=g),
        "a.f16": torch.randn(7, generator=g).half(),
        "c.bf16": torch.randn(2, 3, 4, generator=g).bfloat16(),
        "d.i64": torch.tensor([-1, 2**40, 3], dtype=torch.int64),
        "e.i32": torch.tensor([[1, -2], [3, 4]], dtype=torch.int32),
        "f.scalar": torch.tensor(2.5),
        "g.empty": torch.zeros(0, 4),
    }


def test_round_trip_all_dtypes(tmp_path):
    path = tmp_path / "m.safetensors"
    src = sample()
    st.save_file(src, path, {"format": "x", "k": "v"})
    got, meta = st.load_file(path)
    assert meta == {"format": "x", "k": "v"}
    assert set(got) == set(src)
    for k, v in src.items():
        assert got[k].dtype == v.dtype, k
        assert tuple(got[k].shape) == tuple(v.shape), k
        assert torch.equal(got[k], v), k


def test_numpy_input_and_layout(tmp_path):
    path = tmp_path / "m.safetensors"
    st.save_file({"z": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.ones(2, np.int32)}, path)
    blob = path.read_bytes()
    (hlen,) = struct.unpack("<Q", blob[:8])
    assert hlen % 8 == 0                       # data starts 8-byte aligned
    header = json.loads(blob[8:8 + hlen])
    assert list(header) == ["a", "z"]          # sorted order, no __metadata__ when none given
    assert header["a"]["data_offsets"] == [0, 8]
    assert header["z"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}
    # little-endian payload
    assert blob[8 + hlen + 8:8 + hlen + 12] == struct.pack("<f", 0.0)
    assert blob[8 + hlen + 12:8 + hlen + 16] == struct.pack("<f", 1.0)


def test_bf16_bits_preserved():
    t = torch.tensor([1.0, -2.0, 3.140625, float("inf")], dtype=torch.bfloat16)
    got, _ = st.deserialize(st.serialize({"t": t}))
    assert torch.equal(got["t"].view(torch.int16), t.view(torch.int16))


def test_rejects_float64():
    with pytest.raises(st.SafetensorsError, match="float64"):
        st.serialize({"x": np.zeros(2)})


def _rebuild(header, data):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("mutate, msg", [
    (lambda b: b[:-3], "truncated"),
    (lambda b: b[:5], "too short"),
    (lambda b: struct.pack("<Q", 10**6) + b[8:], "exceeds"),
    (lambda b: b + b"xx", "trailing"),
])
def test_rejects_corrupt_files(mutate, msg):
    blob = st.serialize(sample())
    with pytest.raises(st.SafetensorsError, match=msg):
        st.deserialize(mutate(blob))


def test_rejects_bad_headers():
    data = bytes(16)
    cases = [
        ({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}}, "unsupported dtype"),
        ({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, "needs 12"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, "overlaps"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, "gap"),
        ({"x": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, "bad shape"),
    ]
    for header, msg in cases:
        with pytest.raises(st.SafetensorsError, match=msg):
            st.deserialize(_rebuild(header, data))
    with pytest.raises(st.SafetensorsError, match="'x'"):
        st.deserialize(_rebuild(cases[1][0], data))   # message names the tensor


def test_lazy_tensors_write_the_bytes_of_eager_ones_made_one_at_a_time(tmp_path):
    src = sample()
    made = []

    def later(name):
        def produce():
            made.append(name)
            return src[name]
        return Lazy(produce, torch.empty(src[name].shape, dtype=src[name].dtype, device="meta"))

    path = tmp_path / "m.safetensors"
    written = []
    st.write_file({k: later(k) for k in src}, path, {"format": "x"},
                  on_tensor=lambda name, n: written.append((name, n)))
    assert path.read_bytes() == st.serialize(src, {"format": "x"})
    assert made == sorted(src)                      # each made once, in file order
    assert written == [(k, src[k].numel() * src[k].element_size()) for k in sorted(src)]
    assert st.total_bytes({k: later(k) for k in src}) == sum(n for _, n in written)


def test_lazy_that_makes_another_shape_is_an_error_and_leaves_no_file(tmp_path):
    path = tmp_path / "m.safetensors"
    liar = Lazy(lambda: torch.zeros(3), torch.empty(4, device="meta"))
    with pytest.raises(st.SafetensorsError, match=r"'b'.*F32 \[3\].*F32 \[4\]"):
        st.write_file({"a": torch.ones(2), "b": liar}, path)
    assert not path.exists()


def test_open_file_reads_only_what_is_asked(tmp_path):
    path = tmp_path / "m.safetensors"
    src = sample()
    st.save_file(src, path, {"k": "v"})
    f = st.open_file(path)
    assert f.metadata == {"k": "v"} and sorted(f.names()) == sorted(src)
    lazy = f.lazy("c.bf16")
    assert lazy.shape == src["c.bf16"].shape and lazy.dtype == torch.bfloat16
    # Overwrite every other tensor's data: what is read by offset is only the asked one.
    begin, end = f._entries["c.bf16"][2:]
    blob = bytearray(path.read_bytes())
    start = len(blob) - sum(t.numel() * t.element_size() for t in src.values())
    for i in range(start, len(blob)):
        if not start + begin <= i < start + end:
            blob[i] = 0xff
    path.write_bytes(bytes(blob))
    assert torch.equal(lazy().view(torch.int16), src["c.bf16"].view(torch.int16))


def test_open_file_names_the_file_of_a_bad_header(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(st.serialize(sample())[:-3])
    with pytest.raises(st.SafetensorsError, match=rf"{path}: tensor .*outside the data buffer"):
        st.open_file(path)


def test_stack_and_cat_fill_from_one_part_at_a_time():
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(2, 3, generator=g) for _ in range(3)]
    made = []

    def part(t):
        def produce():
            # The part made before this one is already dropped.
            assert all(ref() is None for ref in made)
            copy = t.clone()
            made.append(weakref.ref(copy))
            return copy
        return Lazy(produce, torch.empty(t.shape, device="meta"))

    s = stack([part(t) for t in parts])
    assert s.shape == (3, 2, 3) and not made
    assert torch.equal(s(), torch.stack(parts)) and len(made) == 3
    c = cat([part(t) for t in parts], dim=1)
    assert c.shape == (2, 9)
    assert torch.equal(c(), torch.cat(parts, 1)) and len(made) == 6

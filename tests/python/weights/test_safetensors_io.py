import json
import struct

import numpy as np
import pytest
import torch

from weights import safetensors_io as st


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

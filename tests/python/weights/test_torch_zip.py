"""weights/converters/torch_zip.py: torch.save files unpickled with every tensor
left on disk until it is made, equal to what torch.load gives."""

import collections
import os
import pickle

import pytest
import torch

from weights.converters import torch_zip
from weights.converters.convert_error import ConvertError
from weights.lazy_tensor import Lazy


def saved(tmp_path):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 4, generator=g)
    sd = collections.OrderedDict(
        plain=torch.randn(3, 5, generator=g),
        transposed=torch.randn(5, 3, generator=g).t(),       # not contiguous
        row=base[2],                                          # a view at an offset
        base=base,
        strided=base[::2, 1:3],
        half=torch.randn(4, generator=g).bfloat16(),
        f16=torch.randn(2, 2, generator=g).half(),
        ints=torch.arange(7),
        param=torch.nn.Parameter(torch.ones(2)),
        scalar=torch.tensor(1.5),
        empty=torch.zeros(0, 3))
    path = tmp_path / "sd.bin"
    torch.save(sd, path)
    return path


def test_lazy_load_equals_torch_load(tmp_path):
    path = saved(tmp_path)
    want = torch.load(path)
    got = torch_zip.load(path)
    assert isinstance(got, collections.OrderedDict) and list(got) == list(want)
    for name, t in want.items():
        assert isinstance(got[name], Lazy), name
        assert got[name].shape == t.shape and got[name].dtype == t.dtype, name
        made = got[name]()
        assert made.shape == t.shape and made.dtype == t.dtype, name
        assert torch.equal(made.detach(), t.detach()), name


def test_nothing_is_read_until_made(tmp_path):
    path = saved(tmp_path)
    got = torch_zip.load(path)
    # Zero every storage record's bytes: shapes still known, data read only now.
    blob = bytearray(path.read_bytes())
    reader = torch_zip._Reader(path)
    for member in reader.members:
        if "/data/" in member:
            start, size = reader.data_offset(member)
            blob[start:start + size] = bytes(size)
    path.write_bytes(bytes(blob))
    assert got["plain"].shape == (3, 5)
    assert torch.equal(got["plain"](), torch.zeros(3, 5))


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


def test_refuses_globals_it_was_not_given(tmp_path):
    path = tmp_path / "evil.bin"
    torch.save({"x": torch.ones(1), "y": Evil()}, path)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load .*system"):
        torch_zip.load(path)


def test_truncated_file_names_it(tmp_path):
    path = saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(torch_zip.TorchZipError, match=str(path)):
        torch_zip.load(path)


def test_file_cut_after_load_is_a_convert_error_naming_file_and_tensor(tmp_path):
    path = saved(tmp_path)
    got = torch_zip.load(path)
    reader = torch_zip._Reader(path)
    start, _ = reader.data_offset(reader.prefix + "data/0")
    os.truncate(path, start + 4)
    with pytest.raises(ConvertError) as e:     # convert's CLI reports these, no traceback
        got["plain"]()
    assert str(path) in str(e.value) and "'plain'" in str(e.value)

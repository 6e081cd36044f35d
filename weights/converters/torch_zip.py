"""torch.save files (the zip format, torch >= 1.6) read lazily: the pickle is
loaded with every tensor left on disk as a Lazy (weights/lazy_tensor.py) that
reads its bytes from the zip when it is made.

torch 1.13's torch.load reads every storage while it unpickles (it has no mmap),
so a pytorch_model.bin or a fairseq checkpoint would otherwise be in memory
whole. Here the unpickler resolves torch's tensor-rebuild functions to ones
that only note where a tensor lies (storage record, dtype, offset, size,
stride); torch.save writes each storage as an uncompressed zip member, so the
tensor is read with one seek. Like torch.load(weights_only=True), the
unpickler refuses every global but those and the ones the caller admits.
"""

import collections
import io
import pickle
import zipfile

import numpy as np
import torch

from weights.converters.convert_error import ConvertError
from weights.lazy_tensor import Lazy

# The storage classes torch.save names, by dtype; numpy has no bfloat16, whose
# bits travel as int16.
_STORAGES = {"FloatStorage": torch.float32, "HalfStorage": torch.float16,
             "BFloat16Storage": torch.bfloat16, "DoubleStorage": torch.float64,
             "LongStorage": torch.int64, "IntStorage": torch.int32, "ShortStorage": torch.int16,
             "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool}
_NUMPY = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.int16,
          torch.float64: np.float64, torch.int64: np.int64, torch.int32: np.int32,
          torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
          torch.bool: np.bool_}
_LOCAL_HEADER = 30          # a zip local file header's fixed part, before name and extra


class TorchZipError(ConvertError):
    """A torch.save file this reader cannot read; the message names the file
    (and the tensor, for one whose bytes are missing)."""


class _StorageType:
    def __init__(self, dtype):
        self.dtype = dtype


class _Storage:
    """Where one storage's bytes lie in the zip: a member name and its dtype."""

    def __init__(self, member, dtype, numel):
        self.member, self.dtype, self.numel = member, dtype, numel


class _Reader:
    def __init__(self, path):
        self.path = path
        try:
            with zipfile.ZipFile(path) as z:
                self.members = {i.filename: i for i in z.infolist()}
                pickles = [n for n in self.members if n.endswith("/data.pkl")]
                if len(pickles) != 1:
                    raise TorchZipError(f"{path}: no single */data.pkl in the zip")
                self.prefix = pickles[0][:-len("data.pkl")]
                order = self.prefix + "byteorder"
                if order in self.members and z.read(order) != b"little":
                    raise TorchZipError(f"{path}: saved big-endian, which is not supported")
                self.pickle = z.read(pickles[0])
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise TorchZipError(f"{path}: not a readable zip-format torch.save file: {e}") from None

    def data_offset(self, member):
        """File offset of `member`'s bytes; it must be stored uncompressed."""
        info = self.members.get(member)
        if info is None:
            raise TorchZipError(f"{self.path}: no storage record {member}")
        if info.compress_type != zipfile.ZIP_STORED:
            raise TorchZipError(f"{self.path}: storage record {member} is compressed")
        with open(self.path, "rb") as f:
            f.seek(info.header_offset)
            local = f.read(_LOCAL_HEADER)
        if len(local) != _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
            raise TorchZipError(f"{self.path}: bad zip header for {member}")
        name_len = int.from_bytes(local[26:28], "little")
        extra_len = int.from_bytes(local[28:30], "little")
        return info.header_offset + _LOCAL_HEADER + name_len + extra_len, info.file_size

    def read(self, name, storage, offset, size, stride):
        """The tensor at `offset` elements into `storage`, of `size` and `stride`."""
        dtype = storage.dtype
        np_dtype = np.dtype(_NUMPY[dtype]).newbyteorder("<")
        numel = int(np.prod(size, dtype=np.int64)) if size else 1
        # Read only the elements the tensor spans, not its whole storage.
        span = 0 if numel == 0 else 1 + sum((n - 1) * s for n, s in zip(size, stride))
        start, record = self.data_offset(storage.member)
        if (offset + span) * np_dtype.itemsize > record:
            raise TorchZipError(f"{self.path}: tensor {name!r} lies beyond its storage record")
        with open(self.path, "rb") as f:
            f.seek(start + offset * np_dtype.itemsize)
            arr = np.fromfile(f, dtype=np_dtype, count=span)
        if arr.size != span:
            raise TorchZipError(f"{self.path}: tensor {name!r}: file ends inside its data "
                                "(truncated?)")
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        flat = torch.from_numpy(arr)
        if dtype == torch.bfloat16:
            flat = flat.view(torch.bfloat16)
        return flat.as_strided(size, stride) if numel else flat.reshape(size)


class _TensorRef:
    """A tensor the unpickler met: its storage and geometry, no data."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), \
            tuple(stride)


def _rebuild_tensor(storage, storage_offset, size, stride, *_):
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data, *_):
    return data


_TORCH_GLOBALS = {("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
                  ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
                  ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
                  ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
                  ("collections", "OrderedDict"): collections.OrderedDict}


def load(path, find_class=None):
    """The object torch.save wrote to `path`, every tensor in it a Lazy.

    Globals other than torch's tensor rebuilding and OrderedDict are refused
    unless find_class(module, name) returns them (it raises to refuse).
    Raises TorchZipError for a file that is not a readable torch zip, and
    pickle.UnpicklingError for a refused global."""
    reader = _Reader(path)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in _TORCH_GLOBALS:
                return _TORCH_GLOBALS[(module, name)]
            if module == "torch" and name in _STORAGES:
                return _StorageType(_STORAGES[name])
            if find_class is not None:
                return find_class(module, name)
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from {path}")

        def persistent_load(self, saved_id):
            if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"
                    and isinstance(saved_id[1], _StorageType)):
                raise pickle.UnpicklingError(f"unexpected persistent id {saved_id!r:.80} in {path}")
            _, storage_type, key, _, numel = saved_id
            return _Storage(f"{reader.prefix}data/{key}", storage_type.dtype, numel)

    obj = Unpickler(io.BytesIO(reader.pickle), encoding="utf-8").load()
    return _lazy(obj, reader)


def _lazy(obj, reader, name="tensor"):
    """obj with each _TensorRef replaced by a Lazy reading it (containers rebuilt;
    a tensor's name in errors is its key)."""
    if isinstance(obj, _TensorRef):
        meta = torch.empty(obj.size, dtype=obj.storage.dtype, device="meta")
        return Lazy(lambda: reader.read(name, obj.storage, obj.offset, obj.size, obj.stride),
                    meta)
    if isinstance(obj, dict):
        out = collections.OrderedDict() if isinstance(obj, collections.OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _lazy(v, reader, k if isinstance(k, str) else name)
        return out
    if type(obj) in (list, tuple):
        return type(obj)(_lazy(v, reader, name) for v in obj)
    return obj

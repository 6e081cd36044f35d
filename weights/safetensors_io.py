"""Read and write the safetensors format without the `safetensors` package.

The format: 8-byte little-endian header length H, H bytes of JSON header
(name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
"__metadata__" map of str -> str), then the data buffer. Offsets are relative to
the start of the data buffer. Tensors are stored little-endian, row-major.

Reading validates everything the C++ loader will also validate (offsets inside the
buffer, byte counts matching dtype x shape, no overlap, no gaps) so a file this
module accepts is one the engine accepts too.

Both directions stream, so that files larger than memory pass through: open_file
parses only the header and reads a tensor from its offset when asked, and
write_file takes Lazy tensors (weights/lazy_tensor.py), writes the header from
their shapes and dtypes, then makes, writes and drops them one at a time.
"""

import json
import os
import struct
import sys

import numpy as np
import torch

from weights.lazy_tensor import Lazy

# safetensors dtype tag -> (torch dtype, bytes per element)
_DTYPES = {
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
}
_TAG_OF = {td: tag for tag, (td, _) in _DTYPES.items()}
# numpy has no bfloat16: BF16 payloads travel through numpy as raw int16 bits.
_NP_BITS = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.int16,
            torch.int64: np.int64, torch.int32: np.int32}

# A header larger than this is certainly corrupt (the official reader uses 100 MB).
MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """Malformed safetensors file or unsupported content; the message names the tensor."""


def dtype_tag(t):
    """The safetensors dtype tag ("F32", ...) of a torch tensor (or a Lazy)."""
    try:
        return _TAG_OF[t.dtype]
    except KeyError:
        raise SafetensorsError(f"unsupported dtype {t.dtype}") from None


def _as_tensor(name, value):
    if isinstance(value, np.ndarray):
        if value.dtype == np.float64:
            raise SafetensorsError(f"tensor {name!r}: float64 is not a supported dtype")
        value = torch.from_numpy(np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        raise SafetensorsError(f"tensor {name!r}: expected a tensor, got {type(value).__name__}")
    if value.dtype not in _TAG_OF:
        raise SafetensorsError(f"tensor {name!r}: unsupported dtype {value.dtype}")
    return value.detach().cpu().contiguous()


def _le_array(t):
    """t's data as a flat little-endian numpy array (a view where the machine is little-endian)."""
    arr = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return arr.reshape(-1).astype(arr.dtype.newbyteorder("<"), copy=False)


def _to_bytes(t):
    return _le_array(t).tobytes()


def _nbytes(tag, shape):
    return int(np.prod(shape, dtype=np.int64)) * _DTYPES[tag][1]


def _plan(tensors):
    """[(name, value, tag, shape)] in file order (sorted names); values stay as given."""
    plan = []
    for name in sorted(tensors):
        if name == "__metadata__":
            raise SafetensorsError("'__metadata__' is reserved and cannot be a tensor name")
        value = tensors[name]
        if not isinstance(value, Lazy):
            value = _as_tensor(name, value)
        if value.dtype not in _TAG_OF:
            raise SafetensorsError(f"tensor {name!r}: unsupported dtype {value.dtype}")
        plan.append((name, value, _TAG_OF[value.dtype], [int(s) for s in value.shape]))
    return plan


def _header(plan, metadata):
    """The file's first bytes (length, JSON, padding) for a _plan."""
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"__metadata__ must map str to str (key {k!r})")
    header = {}
    offset = 0
    for name, _, tag, shape in plan:
        size = _nbytes(tag, shape)
        header[name] = {"dtype": tag, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header = {"__metadata__": dict(metadata), **header}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad the header with spaces so the data starts 8-byte aligned (what the
    # reference writer does; lets readers mmap the data with natural alignment).
    hjson += b" " * (-len(hjson) % 8)
    return struct.pack("<Q", len(hjson)) + hjson


def _made(name, value, tag, shape):
    """The tensor of a plan entry, checked against the header already written for it."""
    t = _as_tensor(name, value() if isinstance(value, Lazy) else value)
    if _TAG_OF[t.dtype] != tag or list(t.shape) != shape:
        raise SafetensorsError(f"tensor {name!r}: made as {_TAG_OF[t.dtype]} {list(t.shape)}, "
                               f"but announced as {tag} {shape}")
    return t


def serialize(tensors, metadata=None):
    """Return the file bytes for {name: tensor}. Tensors are laid out in sorted name order."""
    plan = _plan(tensors)
    head = _header(plan, metadata)
    return head + b"".join(_to_bytes(_made(*entry)) for entry in plan)


def write_file(tensors, path, metadata=None, on_tensor=None):
    """Write {name: tensor or Lazy} to `path`, byte for byte what save_file writes.

    The header comes from the shapes and dtypes alone; then each Lazy is made,
    written and dropped in turn, so memory holds one output tensor (and what
    making it needs) at a time. on_tensor(name, nbytes) follows each tensor
    written. A Lazy that makes something other than it announced is an error
    naming it."""
    plan = _plan(tensors)
    head = _header(plan, metadata)
    try:
        with open(path, "wb") as f:
            f.write(head)
            for entry in plan:
                arr = _le_array(_made(*entry))
                f.write(arr.view(np.uint8))
                if on_tensor is not None:
                    on_tensor(entry[0], arr.nbytes)
                del arr
    except BaseException:
        # Leave no cut-off file behind for someone to take for a whole one.
        if os.path.exists(path):
            os.remove(path)
        raise


def total_bytes(tensors):
    """The data bytes write_file will write for {name: tensor or Lazy}."""
    return sum(_nbytes(tag, shape) for _, _, tag, shape in _plan(tensors))


def save_file(tensors, path, metadata=None):
    """Write {name: tensor} (torch or numpy) to `path`."""
    write_file(tensors, path, metadata)


def _entries(header, data_len):
    """Validate a parsed header against a data buffer of data_len bytes; return
    ({name: (torch dtype, shape, begin, end)} in header order, metadata)."""
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError("__metadata__ must map str to str")
    entries = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"tensor {name!r}: header entry must have dtype, shape, data_offsets")
        tag, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if tag not in _DTYPES:
            raise SafetensorsError(f"tensor {name!r}: unsupported dtype {tag!r}")
        if (not isinstance(shape, list) or
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
            raise SafetensorsError(f"tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise SafetensorsError(f"tensor {name!r}: bad data_offsets {offs!r}")
        begin, end = offs
        tdtype, width = _DTYPES[tag]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= data_len:
            raise SafetensorsError(
                f"tensor {name!r}: data_offsets [{begin}, {end}] outside the data buffer "
                f"of {data_len} bytes (file truncated?)")
        if end - begin != count * width:
            raise SafetensorsError(
                f"tensor {name!r}: {end - begin} bytes for {tag} {shape} (needs {count * width})")
        entries[name] = (tdtype, shape, begin, end)
    # The buffer must be exactly covered: no overlaps, no holes, nothing trailing.
    pos = 0
    for begin, end, name in sorted((b, e, n) for n, (_, _, b, e) in entries.items()):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else "leaves a gap before it"
            raise SafetensorsError(f"tensor {name!r}: data {what}")
        pos = end
    if pos != data_len:
        raise SafetensorsError(f"{data_len - pos} trailing bytes after the last tensor")
    return entries, metadata


def _header_length(head, size):
    if len(head) < 8:
        raise SafetensorsError(f"file too short for a header length ({size} bytes)")
    (hlen,) = struct.unpack("<Q", head[:8])
    if hlen > MAX_HEADER or 8 + hlen > size:
        raise SafetensorsError(f"header length {hlen} exceeds the file size {size}")
    return hlen


def _parse_json(raw):
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None


def _tensor(arr, tdtype, shape):
    """A torch tensor owning `arr`'s little-endian data, in native byte order."""
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    t = torch.from_numpy(arr).reshape(shape)
    return t.view(torch.bfloat16) if tdtype == torch.bfloat16 else t


def deserialize(blob):
    """Parse file bytes; return ({name: torch.Tensor}, metadata dict)."""
    hlen = _header_length(blob[:8], len(blob))
    data = memoryview(blob)[8 + hlen:]
    entries, metadata = _entries(_parse_json(blob[8:8 + hlen]), len(data))
    tensors = {}
    for name, (tdtype, shape, begin, end) in entries.items():
        arr = np.frombuffer(data[begin:end], dtype=np.dtype(_NP_BITS[tdtype]).newbyteorder("<"))
        tensors[name] = _tensor(arr.copy(), tdtype, shape)
    return tensors, metadata


class SafetensorsFile:
    """One file's header, read and checked at open; tensors read by offset on demand.

    Errors name the file (and the tensor). Only the header stays in memory, so
    any number of shards can be open at once."""

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                hlen = _header_length(f.read(8), size)
                raw = f.read(hlen)
            entries, self.metadata = _entries(_parse_json(raw), size - 8 - hlen)
        except SafetensorsError as e:
            raise SafetensorsError(f"{self.path}: {e}") from None
        self._data_start = 8 + hlen
        self._entries = entries

    def names(self):
        """Tensor names in header order."""
        return list(self._entries)

    def meta(self, name):
        """A meta-device tensor with the shape and dtype of `name`."""
        tdtype, shape, _, _ = self._entries[name]
        return torch.empty(shape, dtype=tdtype, device="meta")

    def read(self, name):
        """Tensor `name`, read from the file now."""
        tdtype, shape, begin, end = self._entries[name]
        np_dtype = np.dtype(_NP_BITS[tdtype]).newbyteorder("<")
        count = (end - begin) // np_dtype.itemsize
        with open(self.path, "rb") as f:
            f.seek(self._data_start + begin)
            arr = np.fromfile(f, dtype=np_dtype, count=count)
        if arr.size != count:
            raise SafetensorsError(f"{self.path}: tensor {name!r}: file ends inside its data "
                                   "(truncated since it was opened?)")
        return _tensor(arr, tdtype, shape)

    def lazy(self, name):
        """Tensor `name` as a Lazy that reads it when made."""
        return Lazy(lambda: self.read(name), self.meta(name))


def open_file(path):
    """A SafetensorsFile: the header of `path` read and validated, no data read."""
    return SafetensorsFile(path)


def load_file(path):
    """Read `path`; return ({name: torch.Tensor}, metadata dict)."""
    f = open_file(path)
    return {name: f.read(name) for name in f.names()}, f.metadata

"""Read and write the safetensors format without the `safetensors` package.

The format: 8-byte little-endian header length H, H bytes of JSON header
(name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
"__metadata__" map of str -> str), then the data buffer. Offsets are relative to
the start of the data buffer. Tensors are stored little-endian, row-major.

Reading validates everything the C++ loader will also validate (offsets inside the
buffer, byte counts matching dtype x shape, no overlap, no gaps) so a file this
module accepts is one the engine accepts too.
"""

import json
import struct

import numpy as np
import torch

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
    """The safetensors dtype tag ("F32", ...) of a torch tensor."""
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


def _to_bytes(t):
    # Reinterpret through a numpy dtype of the same width; force little-endian.
    arr = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def serialize(tensors, metadata=None):
    """Return the file bytes for {name: tensor}. Tensors are laid out in sorted name order."""
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"__metadata__ must map str to str (key {k!r})")
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise SafetensorsError("'__metadata__' is reserved and cannot be a tensor name")
        t = _as_tensor(name, tensors[name])
        data = _to_bytes(t)
        header[name] = {"dtype": dtype_tag(t), "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header = {"__metadata__": dict(metadata), **header}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad the header with spaces so the data starts 8-byte aligned (what the
    # reference writer does; lets readers mmap the data with natural alignment).
    hjson += b" " * (-len(hjson) % 8)
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(chunks)


def save_file(tensors, path, metadata=None):
    """Write {name: tensor} (torch or numpy) to `path`."""
    blob = serialize(tensors, metadata)
    with open(path, "wb") as f:
        f.write(blob)


def deserialize(blob):
    """Parse file bytes; return ({name: torch.Tensor}, metadata dict)."""
    if len(blob) < 8:
        raise SafetensorsError(f"file too short for a header length ({len(blob)} bytes)")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > MAX_HEADER or 8 + hlen > len(blob):
        raise SafetensorsError(f"header length {hlen} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError("__metadata__ must map str to str")
    data = memoryview(blob)[8 + hlen:]
    tensors = {}
    spans = []
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
        if not 0 <= begin <= end <= len(data):
            raise SafetensorsError(
                f"tensor {name!r}: data_offsets [{begin}, {end}] outside the data buffer "
                f"of {len(data)} bytes (file truncated?)")
        if end - begin != count * width:
            raise SafetensorsError(
                f"tensor {name!r}: {end - begin} bytes for {tag} {shape} (needs {count * width})")
        spans.append((begin, end, name))
        arr = np.frombuffer(data[begin:end], dtype=np.dtype(_NP_BITS[tdtype]).newbyteorder("<"))
        t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True)).reshape(shape)
        tensors[name] = t.view(torch.bfloat16) if tdtype == torch.bfloat16 else t
    # The buffer must be exactly covered: no overlaps, no holes, nothing trailing.
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else "leaves a gap before it"
            raise SafetensorsError(f"tensor {name!r}: data {what}")
        pos = end
    if pos != len(data):
        raise SafetensorsError(f"{len(data) - pos} trailing bytes after the last tensor")
    return tensors, metadata


def load_file(path):
    """Read `path`; return ({name: torch.Tensor}, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    try:
        return deserialize(blob)
    except SafetensorsError as e:
        raise SafetensorsError(f"{path}: {e}") from None

"""A tensor that exists only when it is written.

Converting a checkpoint larger than memory needs every output tensor to be made
from its source tensors at the moment the writer asks for it, and dropped right
after. A `Lazy` is such a promise: calling it makes the tensor, its `shape` and
`dtype` say what it will be before anything is read. Those come from
running the same computation on meta tensors (shape and dtype, no data), so a
converter states a transformation once and the output's safetensors header,
which lists every tensor's shape before the first byte of data, is known up
front.

    w = checkpoint["x.weight"]                     # a Lazy reading from its shard
    a = w.map(lambda t: -torch.exp(t.float()))     # nothing read yet; a.shape known
    stacked = stack(experts)                       # one expert in memory at a time
"""

import torch


class Lazy:
    """A tensor made on demand by `produce()`; shape and dtype are those of `meta`
    (a tensor on the meta device that the same computation yields)."""

    __slots__ = ("meta", "_produce")

    def __init__(self, produce, meta):
        if not isinstance(meta, torch.Tensor) or meta.device.type != "meta":
            raise TypeError("Lazy needs a meta tensor for its shape and dtype")
        self._produce = produce
        self.meta = meta

    @classmethod
    def of(cls, tensor):
        """A Lazy that hands back `tensor` itself (already in memory)."""
        return cls(lambda: tensor, torch.empty(tensor.shape, dtype=tensor.dtype, device="meta"))

    @classmethod
    def combine(cls, fn, *parts):
        """fn(*tensors of parts), made only when asked (one output computed from
        several source tensors); all parts are in memory together while it is
        made, none before or after. stack() and cat() hold one part at a time."""
        return cls(lambda: fn(*(p() for p in parts)), fn(*(p.meta for p in parts)))

    @property
    def shape(self):
        return self.meta.shape

    @property
    def dtype(self):
        return self.meta.dtype

    def __call__(self):
        return self._produce()

    def map(self, fn):
        """fn(this tensor), made only when asked."""
        return Lazy(lambda: fn(self._produce()), fn(self.meta))

    def to(self, dtype):
        """This tensor in `dtype`, made only when asked."""
        return self.map(lambda t: t.to(dtype))


def stack(parts):
    """Lazy of torch.stack(parts), filled one part at a time: while it is made,
    memory holds the result and one part."""
    meta = torch.stack([p.meta for p in parts])

    def produce():
        out = torch.empty(meta.shape, dtype=meta.dtype)
        for i, p in enumerate(parts):
            out[i] = p()
        return out
    return Lazy(produce, meta)


def cat(parts, dim=0):
    """Lazy of torch.cat(parts, dim), filled one part at a time like stack()."""
    meta = torch.cat([p.meta for p in parts], dim)

    def produce():
        out = torch.empty(meta.shape, dtype=meta.dtype)
        at = 0
        for p in parts:
            n = p.shape[dim]
            out.narrow(dim, at, n).copy_(p())
            at += n
        return out
    return Lazy(produce, meta)


def lazy(value):
    """`value` as a Lazy: itself when it is one, else a tensor already in memory."""
    return value if isinstance(value, Lazy) else Lazy.of(value)


def lazy_dict(tensors):
    """{name: Lazy} of a {name: tensor or Lazy} mapping."""
    return {name: lazy(v) for name, v in tensors.items()}


def materialize(value):
    """The tensor a Lazy makes, or `value` itself when it is already a tensor."""
    return value() if isinstance(value, Lazy) else value

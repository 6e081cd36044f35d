"""PyTorch reference of a whole canonical model, full-sequence (parallel) form.

The stack is a list of blocks (MODELS.md 6); each kind registers a function
  forward(r, p, blk, cfg) -> new residual   (r: [T, D]; p: the block's tensors
  by short name, norm included; blk: its config; cfg: the model config)
so every kind owns its residual policy (most are r + f(norm(r)); seqboat is not).
A block's optional `residual_scale` s (Granite's residual_multiplier) makes it
r + s * f(norm(r)): the model scales what the block added.

Kinds with a state-carrying form also register
  forward_state(r, p, blk, cfg, state) -> (new residual, new state)
and an initial state; with them (and the stateless kinds) ReferenceModel.forward_with_state
runs a sequence in pieces, carrying each block's state from one call to the next.
"""

import torch
import torch.nn.functional as F

from weights import canonical
from weights.reference import attention
from weights.reference import gdn
from weights.reference import mamba
from weights.reference import mamba2
from weights.reference import mlp as mlp_ref
from weights.reference import moe as moe_ref
from weights.reference import parallel
from weights.reference import s4d as s4d_ref
from weights.reference import seqboat
from weights.reference.norms import apply_norm

# Block kind -> full-sequence forward. One entry per kind.
BLOCK_FORWARD = {
    "mamba1": mamba.mamba1_block,
    "mamba2": mamba2.mamba2_block,
    "mlp": mlp_ref.mlp_block,
    "moe": moe_ref.moe_block,
    "s4d": s4d_ref.s4d_block,
    "seqboat": seqboat.seqboat_block,
    "attention": attention.attention_block,
    "gdn": gdn.gdn_block,
    "parallel_mamba2_attention": parallel.parallel_mamba2_attention_block,
}

# Block kind -> (new_state(blk, dtype), forward_state). Kinds without state (mlp, moe)
# pass their state, None, through.
BLOCK_STATEFUL = {
    "gdn": (gdn.new_state, gdn.gdn_block_state),
}
STATELESS = ("mlp", "moe")


def _scaled(r, out, blk):
    """The residual after a block that turned r into out, with its residual_scale."""
    scale = blk.get("residual_scale", 1.0)
    return out if scale == 1.0 else r + scale * (out - r)


class ReferenceModel:
    """A canonical model held as plain tensors in one compute dtype."""

    def __init__(self, config, tensors, dtype=torch.float32):
        canonical.check_tensors(config, tensors)
        self.config = config
        self.dtype = dtype
        self.t = {k: v.to(dtype) for k, v in tensors.items()}
        self.blocks = []
        for i, _ in enumerate(config["blocks"]):
            prefix = f"blocks.{i}."
            self.blocks.append({k[len(prefix):]: v for k, v in self.t.items()
                                if k.startswith(prefix)})

    @classmethod
    def load(cls, model_dir, dtype=torch.float32):
        config, tensors, _ = canonical.load_model_dir(model_dir)
        return cls(config, tensors, dtype)

    @torch.no_grad()
    def forward(self, tokens):
        """Logits [T, V] for a 1-D sequence of token ids, from a fresh state."""
        cfg = self.config
        r = self._embed(tokens)
        for blk, p in zip(cfg["blocks"], self.blocks):
            r = _scaled(r, BLOCK_FORWARD[blk["kind"]](r, p, blk, cfg), blk)
        return self._head(r)

    def new_state(self):
        """A fresh sequence's state: one entry per block (None for stateless kinds).
        Raises NotImplementedError for a kind with no state-carrying form."""
        state = []
        for i, blk in enumerate(self.config["blocks"]):
            if blk["kind"] in STATELESS:
                state.append(None)
            elif blk["kind"] in BLOCK_STATEFUL:
                state.append(BLOCK_STATEFUL[blk["kind"]][0](blk, self.dtype))
            else:
                raise NotImplementedError(
                    f"blocks[{i}] kind {blk['kind']!r} has no state-carrying reference form")
        return state

    @torch.no_grad()
    def forward_with_state(self, tokens, state=None):
        """(logits [T, V], new state) for the next tokens of a sequence that has
        reached `state` (None: a fresh one). Feeding a sequence in pieces gives
        the logits of feeding it whole."""
        cfg = self.config
        state = self.new_state() if state is None else state
        r, new = self._embed(tokens), []
        for blk, p, s in zip(cfg["blocks"], self.blocks, state):
            if blk["kind"] in STATELESS:
                r = _scaled(r, BLOCK_FORWARD[blk["kind"]](r, p, blk, cfg), blk)
            else:
                out, s = BLOCK_STATEFUL[blk["kind"]][1](r, p, blk, cfg, s)
                r = _scaled(r, out, blk)
            new.append(s)
        return self._head(r), new

    @torch.no_grad()
    def hidden(self, tokens):
        """The hidden state [T, D] the head reads (after the final norm)."""
        cfg = self.config
        r = self._embed(tokens)
        for blk, p in zip(cfg["blocks"], self.blocks):
            r = _scaled(r, BLOCK_FORWARD[blk["kind"]](r, p, blk, cfg), blk)
        return apply_norm(r, self.t, cfg.get("final_norm"), prefix="final_norm.")

    def _embed(self, tokens):
        tokens = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
        return self.t["embed.weight"][tokens] * self.config["embed"]["scale"]

    def _head(self, r):
        cfg = self.config
        h = apply_norm(r, self.t, cfg.get("final_norm"), prefix="final_norm.")
        head = self.t["embed.weight"] if cfg["tie_embeddings"] else self.t["lm_head.weight"]
        return F.linear(h, head) * cfg["logit_scale"]

"""The decoder-layer tensors that the Llama-family HF architectures (Llama,
Mistral, Qwen2, Bamba, Jamba) name alike: the attention's q/k/v/o_proj and
the gated MLP's gate/up/down_proj, their shapes in the checkpoint and their
canonical names. `s` prefixes are source names (up to and including
`self_attn.`, `mlp.` or `feed_forward.`), `c` prefixes canonical blocks; `mat`
turns a source name into the tensor to write (hf_checkpoint.matrices)."""


def attention_shapes(s, d_model, q_dim, kv_dim, bias):
    """{source name: shape} of one attention; bias(n) says whether projection
    n ("q", "k", "v" or "o") has a bias."""
    D = d_model
    shapes = {}
    for n, shape in (("q", (q_dim, D)), ("k", (kv_dim, D)), ("v", (kv_dim, D)),
                     ("o", (D, q_dim))):
        shapes[s + f"{n}_proj.weight"] = shape
        if bias(n):
            shapes[s + f"{n}_proj.bias"] = shape[:1]
    return shapes


def map_attention(mat, s, c, bias):
    """The canonical attn.{q,k,v,o} tensors of block `c`, in the checkpoint's
    layout (the half-split one for RoPE)."""
    out = {}
    for n in ("q", "k", "v", "o"):
        out[c + f"attn.{n}.weight"] = mat(s + f"{n}_proj.weight")
        if bias(n):
            out[c + f"attn.{n}.bias"] = mat(s + f"{n}_proj.bias")
    return out


def mlp_shapes(s, d_model, d_ff, bias):
    """{source name: shape} of one gated MLP (with biases if `bias`)."""
    shapes = {}
    for n, shape in (("gate", (d_ff, d_model)), ("up", (d_ff, d_model)),
                     ("down", (d_model, d_ff))):
        shapes[s + f"{n}_proj.weight"] = shape
        if bias:
            shapes[s + f"{n}_proj.bias"] = shape[:1]
    return shapes


def map_mlp(mat, s, c, bias):
    """The canonical mlp.{gate,up,down} tensors of block `c`."""
    out = {}
    for n in ("gate", "up", "down"):
        out[c + f"mlp.{n}.weight"] = mat(s + f"{n}_proj.weight")
        if bias:
            out[c + f"mlp.{n}.bias"] = mat(s + f"{n}_proj.bias")
    return out

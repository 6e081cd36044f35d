"""The C++ engine's SeqBoat block equals the float64 full-sequence reference.

The reference (weights/reference/seqboat.py) is the training form: EMA by FFT
convolution, compression of the active tokens and block attention with the
exact-window mask. The engine runs the O(1) step: EMA recurrence and a FIFO
working memory. Random routers are biased so a mix of active and inactive
tokens occurs, and the window is smaller than the number of active tokens so
the FIFO evicts.
"""

import math

import numpy as np
import pytest
import torch

from weights import canonical
from weights.reference import logits as ref_logits
from weights.reference import seqboat as ref
from weights.reference.make_random_model import random_mamba_tensors
from weights.reference.model import BLOCK_FORWARD, ReferenceModel
from engine_run import run_engine, tokens

D, V = 32, canonical.BYTE_VOCAB
T = 256


def seqboat_block(**over):
    b = {"kind": "seqboat", "norm": {"type": "layernorm", "eps": 1e-5, "affine": True},
         "prenorm": True, "ema_dim": 4, "z_dim": 16, "v_dim": 24, "window": 16,
         "attn_fn": "softmax", "pos": "rope_interleaved", "rope_theta": 10000.0,
         "rel_pos_max": None, "ema_truncation": None}
    b.update(over)
    return b


MAMBA = {"kind": "mamba1", "norm": {"type": "rmsnorm", "eps": 1e-5}, "d_inner": 48,
         "d_state": 4, "d_conv": 4, "dt_rank": 2, "in_proj_bias": False,
         "out_proj_bias": False, "conv_bias": True}

MODELS = {
    "softmax_rope": [seqboat_block(), seqboat_block(window=8)],
    "softmax_simple_bias": [seqboat_block(pos="simple_bias", rel_pos_max=24, rope_theta=None,
                                          norm={"type": "rmsnorm", "eps": 1e-5}),
                            seqboat_block(pos="simple_bias", rel_pos_max=64)],
    "relu2": [seqboat_block(attn_fn="relu2"),
              seqboat_block(attn_fn="relu2", pos="simple_bias", rel_pos_max=32,
                            norm={"type": "scalenorm", "eps": 1e-5})],
    "postnorm": [seqboat_block(prenorm=False),
                 seqboat_block(prenorm=False, norm={"type": "layernorm", "eps": 1e-5,
                                                    "affine": False})],
    "mixed_mamba": [dict(MAMBA), seqboat_block(), dict(MAMBA),
                    seqboat_block(pos="simple_bias", rel_pos_max=16,
                                  norm={"type": "rmsnorm", "eps": 1e-5})],
}


def model_config(blocks):
    blocks = [{k: v for k, v in b.items() if v is not None or k in
               ("rel_pos_max", "ema_truncation")} for b in blocks]
    return {"format": canonical.FORMAT, "version": canonical.VERSION, "name": "random-seqboat",
            "vocab_size": V, "d_model": D, "embed": {"scale": 1.0, "padding_idx": None},
            "tie_embeddings": True, "logit_scale": 1.0,
            "final_norm": {"type": "rmsnorm", "eps": 1e-5, "affine": True},
            "residual_dtype": "float32", "eos_token_id": canonical.BYTE_EOS,
            "bos_token_id": None, "blocks": blocks}


def random_seqboat_tensors(p, b, g):
    def uniform(shape, bound):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    def normal(shape, std):
        return torch.randn(shape, generator=g, dtype=torch.float64) * std

    Ne, z, v = b["ema_dim"], b["z_dim"], b["v_dim"]
    t = {}
    norm = b["norm"]
    if norm is not None and norm.get("affine", True):
        if norm["type"] == "scalenorm":
            t[p + "norm.scalar"] = 1 + normal((1,), 0.1)
        else:
            t[p + "norm.weight"] = 1 + normal((D,), 0.1)
            if norm["type"] == "layernorm":
                t[p + "norm.bias"] = normal((D,), 0.1)
    # MD-EMA derived as the converter does: g = sigmoid(delta) beta,
    # phi = 1 - sigmoid(delta) sigmoid(alpha), eta = gamma / sqrt(N_e).
    delta, alpha = normal((D, Ne), 1.0), normal((D, Ne), 1.0)
    t[p + "ema.in_coef"] = torch.sigmoid(delta) * (1 + normal((D, Ne), 0.3))
    t[p + "ema.decay"] = 1 - torch.sigmoid(delta) * torch.sigmoid(alpha)
    t[p + "ema.out_coef"] = normal((D, Ne), 1.0) / math.sqrt(Ne)
    t[p + "ema.skip"] = normal((D,), 0.5)
    t[p + "router.weight"] = uniform((2, D), 1 / math.sqrt(D))
    t[p + "router.bias"] = normal((2,), 0.1)
    t[p + "router.temperature"] = torch.tensor([0.7], dtype=torch.float64)
    t[p + "hx.weight"] = uniform((D, D), 1 / math.sqrt(D))
    t[p + "hx.bias"] = uniform((D,), 1 / math.sqrt(D))
    t[p + "gau.in_proj.weight"] = uniform((z + 2 * v, D), 1 / math.sqrt(D))
    t[p + "gau.in_proj.bias"] = uniform((z + 2 * v,), 1 / math.sqrt(D))
    t[p + "gau.qk_gamma"] = 1 + normal((2, z), 0.5)
    t[p + "gau.qk_beta"] = normal((2, z), 0.3)
    t[p + "gau.out_proj.weight"] = uniform((D, v), 1 / math.sqrt(v))
    t[p + "gau.out_proj.bias"] = uniform((D,), 1 / math.sqrt(v))
    if b["pos"] == "simple_bias":
        t[p + "gau.rel_pos_bias"] = normal((2 * b["rel_pos_max"] - 1,), 1.0)
    return t


def make_model(out_dir, blocks, seed, toks):
    config = model_config(blocks)
    g = torch.Generator().manual_seed(seed)
    tensors = {"embed.weight": torch.randn((V, D), generator=g, dtype=torch.float64) * 0.5,
               "final_norm.weight": 1 + torch.randn((D,), generator=g, dtype=torch.float64) * 0.1}
    for i, b in enumerate(config["blocks"]):
        p = f"blocks.{i}."
        if b["kind"] == "seqboat":
            tensors.update(random_seqboat_tensors(p, b, g))
        else:
            one = dict(config, blocks=[b])
            sub = random_mamba_tensors(one, seed=seed + i)
            tensors.update({p + k[len("blocks.0."):]: t for k, t in sub.items()
                            if k.startswith("blocks.0.")})
    tensors = {k: t.to(torch.float32) for k, t in tensors.items()}
    calibrate_routers(config, tensors, toks)
    canonical.write_model_dir(out_dir, config, tensors,
                              {"source": f"random seed={seed}", "converter": "test@1"},
                              tokenizer=canonical.byte_tokenizer())
    return config


def calibrate_routers(config, tensors, toks):
    """Sets each seqboat router's bias so about half of `toks` activate the GAU.

    Random routers see SiLU outputs with a non-zero mean and would mostly pick
    one side; the threshold goes into the widest gap between the 40th and 60th
    percentile of u1 - u0, so no decision sits near a tie.
    """
    for i, b in enumerate(config["blocks"]):
        if b["kind"] != "seqboat":
            continue
        p = f"blocks.{i}."
        tensors[p + "router.bias"] = torch.zeros(2)
        sub = dict(config, blocks=config["blocks"][:i + 1])
        subt = {k: t for k, t in tensors.items()
                if not k.startswith("blocks.") or int(k.split(".")[1]) <= i}
        m = ReferenceModel(sub, subt, torch.float64)
        r = m.t["embed.weight"][torch.tensor(toks)] * config["embed"]["scale"]
        for blk, bp in zip(sub["blocks"][:-1], m.blocks[:-1]):
            r = BLOCK_FORWARD[blk["kind"]](r, bp, blk, sub)
        _, _, u = ref.seqboat_layer(r, m.blocks[-1], b)
        diff = np.sort((u[:, 1] - u[:, 0]).numpy())
        lo, hi = int(0.4 * len(diff)), int(0.6 * len(diff))
        j = lo + int(np.argmax(np.diff(diff[lo:hi + 1])))
        threshold = 0.5 * (diff[j] + diff[j + 1])
        tensors[p + "router.bias"] = torch.tensor([threshold, 0.0], dtype=torch.float32)


def reference_trace(model_dir, toks):
    """Per seqboat block: (active indices, router logits), from the float64 reference."""
    m = ReferenceModel.load(model_dir, torch.float64)
    r = m.t["embed.weight"][torch.tensor(toks)] * m.config["embed"]["scale"]
    trace = []
    for blk, p in zip(m.config["blocks"], m.blocks):
        if blk["kind"] == "seqboat":
            r, idx, u = ref.seqboat_layer(r, p, blk)
            trace.append((idx.numpy(), u.numpy()))
        else:
            r = BLOCK_FORWARD[blk["kind"]](r, p, blk, m.config)
    return trace


def state_bytes(b):
    w, z, v, Ne = b["window"], b["z_dim"], b["v_dim"], b["ema_dim"]
    n = 8 * (4 + w) + 4 * (D * Ne + w * z + w * v)
    return (n + 63) // 64 * 64


def aligned(n):
    return (n + 255) // 256 * 256


def seqboat_states(config, raw):
    """Split a slot snapshot into per-seqboat-block (meta, pos, floats)."""
    # Each block's state starts at a 256-byte-aligned offset of the slot (slot_arena.h).
    out, off = [], 0
    for b in config["blocks"]:
        if b["kind"] != "seqboat":
            E, N, K = b["d_inner"], b["d_state"], b["d_conv"]
            off += aligned(4 * (E * (K - 1) + E * N))
            continue
        n = state_bytes(b)
        region = raw[off:off + n]
        w = b["window"]
        ints = np.frombuffer(region[:8 * (4 + w)], dtype=np.int64)
        floats = np.frombuffer(region[8 * (4 + w):], dtype=np.float32)
        out.append((ints[:4], ints[4:], floats))
        off += aligned(n)
    assert off == len(raw)
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_step_by_step_logits_match_full_sequence_reference(tmp_path, engine_logits, name):
    model = tmp_path / "model"
    toks = tokens(T, seed=2)
    config = make_model(model, MODELS[name], seed=11, toks=toks)
    trace = reference_trace(model, toks)
    for (idx, u), b in zip(trace, [b for b in config["blocks"] if b["kind"] == "seqboat"]):
        frac = len(idx) / T
        assert 0.3 <= frac <= 0.7, f"{name}: activation rate {frac}"
        assert len(idx) > b["window"]  # the FIFO must evict
        # A decision closer than this could flip between float64 and float32.
        assert np.abs(u[:, 1] - u[:, 0]).min() > 1e-4
    ref = tmp_path / "ref.npy"
    assert ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)),
                            "--out", str(ref), "--float64"]) == 0
    expected = np.load(ref)
    got = run_engine(engine_logits, model, toks, tmp_path / "step.npy", chunk=1,
                     state_out=tmp_path / "step.state")
    assert got.shape == expected.shape == (T, V)
    err = np.abs(got - expected).max()
    print(f"{name}: max abs error {err:.3g}")
    assert err <= 1e-4, f"{name}: max abs error {err}"
    assert expected.std() > 0.1
    # The working memory holds the last w active tokens, in order, at their
    # original stream positions.
    raw = np.fromfile(tmp_path / "step.state", dtype=np.uint8).tobytes()
    blocks = [b for b in config["blocks"] if b["kind"] == "seqboat"]
    for (meta, pos, _), b, (idx, _) in zip(seqboat_states(config, raw), blocks, trace):
        w = b["window"]
        fifo_len, head, next_pos = meta[0], meta[1], meta[2]
        assert fifo_len == w and next_pos == T
        ordered = [pos[(head + j) % w] for j in range(w)]
        assert ordered == list(idx[-w:])


@pytest.mark.parametrize("chunk", [7, 64])
@pytest.mark.parametrize("name", ["softmax_rope", "mixed_mamba", "relu2"])
def test_chunked_prefill_equals_token_by_token(tmp_path, engine_logits, name, chunk):
    model = tmp_path / "model"
    toks = tokens(T, seed=3)
    config = make_model(model, MODELS[name], seed=5, toks=toks)
    step = run_engine(engine_logits, model, toks, tmp_path / "a.npy", 1, tmp_path / "a.state")
    chunked = run_engine(engine_logits, model, toks, tmp_path / "b.npy", chunk,
                         tmp_path / "b.state")
    err = np.abs(step - chunked).max()
    print(f"{name} chunk {chunk}: max abs diff {err:.3g}")
    assert err <= 1e-5
    ra = np.fromfile(tmp_path / "a.state", dtype=np.uint8).tobytes()
    rb = np.fromfile(tmp_path / "b.state", dtype=np.uint8).tobytes()
    assert len(ra) == len(rb)
    for (ma, pa, fa), (mb, pb, fb) in zip(seqboat_states(config, ra),
                                          seqboat_states(config, rb)):
        np.testing.assert_array_equal(ma, mb)
        np.testing.assert_array_equal(pa, pb)
        assert np.abs(fa).max() > 0
        assert np.abs(fa - fb).max() <= 1e-5


def test_reference_ema_kernel_equals_its_recurrence():
    """Checks the reference's FFT convolution against the defining recurrence."""
    g = torch.Generator().manual_seed(0)
    Ne, L = 3, 50
    p = {"ema.in_coef": torch.rand((D, Ne), generator=g, dtype=torch.float64),
         "ema.decay": torch.rand((D, Ne), generator=g, dtype=torch.float64),
         "ema.out_coef": torch.randn((D, Ne), generator=g, dtype=torch.float64),
         "ema.skip": torch.randn((D,), generator=g, dtype=torch.float64)}
    x = torch.randn((L, D), generator=g, dtype=torch.float64)
    s = torch.zeros(D, Ne, dtype=torch.float64)
    want = []
    for t in range(L):
        s = p["ema.decay"] * s + p["ema.in_coef"] * x[t][:, None]
        want.append((p["ema.out_coef"] * s).sum(1) + p["ema.skip"] * x[t])
    assert torch.allclose(ref.ema(x, p), torch.stack(want), atol=1e-12)


@pytest.mark.parametrize("attn_fn", ["softmax", "relu2"])
def test_reference_block_attention_equals_direct_window(attn_fn):
    """The block form with its mask is the exact window: rho - w <= rho' <= rho."""
    g = torch.Generator().manual_seed(1)
    m, z, v, w, M = 37, 8, 5, 6, 10
    q = torch.randn((m, z), generator=g, dtype=torch.float64)
    k = torch.randn((m, z), generator=g, dtype=torch.float64)
    vv = torch.randn((m, v), generator=g, dtype=torch.float64)
    pos = torch.sort(torch.randperm(200, generator=g)[:m]).values
    rel = torch.randn((2 * M - 1,), generator=g, dtype=torch.float64)
    blk = {"window": w, "pos": "simple_bias", "rel_pos_max": M, "attn_fn": attn_fn}
    got = ref.window_attention(q, k, vv, pos, blk, rel)
    for i in range(m):
        js = list(range(max(0, i - w), i + 1))
        b = torch.stack([rel[M - 1 + int(max(-(M - 1), min(M - 1, pos[j] - pos[i])))]
                         for j in js])
        if attn_fn == "softmax":
            wts = torch.softmax(q[i] @ k[js].t() / math.sqrt(z) + b, dim=0)
        else:
            wts = torch.relu(q[i] / w @ k[js].t() + b) ** 2
        assert torch.allclose(got[i], wts @ vv[js], atol=1e-12)

"""The gdn (Gated DeltaNet, MODELS.md 12) block: its canonical layout and validation,
the float64 reference's chunked form against its recurrence, the delta rule's
defining property, the value-to-key head map, and random gdn models through the
reference model whole, in pieces and token by token."""

import math

import pytest
import torch

from weights import canonical
from weights.reference import gdn, random_any, random_blocks
from weights.reference.model import ReferenceModel

from gdn_step import step_logits

F64 = torch.float64
TOKENS = [256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 0, 255, 263, 7,
          33, 9, 200, 65, 66, 67]


def config(blocks, d_model=16):
    return random_blocks.hybrid_config(blocks, d_model=d_model)


def gen(seed):
    return torch.Generator().manual_seed(seed)


# --- canonical layout and validation ---------------------------------------------------

def test_gdn_block_builder_and_shapes():
    b = canonical.gdn_block(n_k_heads=2, n_v_heads=6, head_k_dim=3, head_v_dim=5, d_conv=4)
    assert b == {"kind": "gdn", "norm": {"type": "rmsnorm", "eps": 1e-6}, "n_k_heads": 2,
                 "n_v_heads": 6, "head_k_dim": 3, "head_v_dim": 5, "d_conv": 4,
                 "gated_norm_eps": 1e-6}
    shapes = canonical.expected_shapes(config([b], d_model=8))
    C = 2 * 2 * 3 + 6 * 5
    block = {k: v for k, v in shapes.items() if k.startswith("blocks.0.")}
    assert block == {"blocks.0.norm.weight": (8,), "blocks.0.in_qkv.weight": (C, 8),
                     "blocks.0.in_z.weight": (30, 8), "blocks.0.in_b.weight": (6, 8),
                     "blocks.0.in_a.weight": (6, 8), "blocks.0.conv.weight": (C, 4),
                     "blocks.0.A": (6,), "blocks.0.dt_bias": (6,),
                     "blocks.0.gated_norm.weight": (5,), "blocks.0.out_proj.weight": (8, 30)}
    assert canonical.is_fp32_only("blocks.0.A") and canonical.is_fp32_only("blocks.0.dt_bias")
    assert not canonical.is_fp32_only("blocks.0.in_a.weight")


@pytest.mark.parametrize("field,value,message", [
    ("n_k_heads", 0, "blocks.1.n_k_heads must be a positive integer"),
    ("n_v_heads", -4, "blocks.1.n_v_heads must be a positive integer"),
    ("head_k_dim", 2.0, "blocks.1.head_k_dim must be a positive integer"),
    ("head_v_dim", True, "blocks.1.head_v_dim must be a positive integer"),
    ("d_conv", None, "blocks.1.d_conv must be a positive integer"),
    ("n_v_heads", 3, "blocks.1.n_v_heads (3) must be a multiple of blocks.1.n_k_heads (2)"),
    ("gated_norm_eps", 0.0, "blocks.1.gated_norm_eps must be a positive number"),
    ("gated_norm_eps", "1e-6", "blocks.1.gated_norm_eps must be a positive number"),
])
def test_gdn_config_errors_name_the_field(field, value, message):
    b = canonical.gdn_block(n_k_heads=2, n_v_heads=4, head_k_dim=4, head_v_dim=4)
    if value is None:
        del b[field]
    else:
        b[field] = value
    cfg = config([random_any.block("mlp", 16), b])
    with pytest.raises(canonical.CanonicalError) as e:
        canonical.expected_shapes(cfg)
    assert message in str(e.value)


def test_gdn_tensors_are_checked_by_name():
    cfg = config([random_any.block("gdn", 16)])
    tensors = random_blocks.random_tensors(cfg, seed=1)
    canonical.check_tensors(cfg, tensors)
    bad = dict(tensors, **{"blocks.0.A": tensors["blocks.0.A"].bfloat16()})
    with pytest.raises(canonical.CanonicalError, match="'blocks.0.A': must be float32"):
        canonical.check_tensors(cfg, bad)
    bad = dict(tensors, **{"blocks.0.gated_norm.weight": torch.ones(16)})
    with pytest.raises(canonical.CanonicalError,
                       match="blocks.0.gated_norm.weight.*expected \\[4\\]"):
        canonical.check_tensors(cfg, bad)
    bad = dict(tensors, **{"blocks.0.in_qkv.bias": torch.zeros(32)})
    with pytest.raises(canonical.CanonicalError, match="unknown tensor 'blocks.0.in_qkv.bias'"):
        canonical.check_tensors(cfg, bad)


# --- the delta rule: chunked form == recurrence, and what one update does ---------------

def rule_inputs(T, H, dk, dv, seed):
    g_ = gen(seed)
    q = torch.randn(T, H, dk, generator=g_, dtype=F64) * dk ** -0.5
    k = gdn.l2norm(torch.randn(T, H, dk, generator=g_, dtype=F64))
    v = torch.randn(T, H, dv, generator=g_, dtype=F64)
    g = -torch.rand(T, H, generator=g_, dtype=F64) * 0.8
    beta = torch.rand(T, H, generator=g_, dtype=F64)
    S0 = torch.randn(H, dk, dv, generator=g_, dtype=F64)
    return q, k, v, g, beta, S0


@pytest.mark.parametrize("T", [1, 5, 17, 63, 64, 65, 130])
@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_chunked_rule_equals_recurrence_from_a_nonzero_state(T, chunk):
    q, k, v, g, beta, S0 = rule_inputs(T, 3, 6, 5, seed=T * 100 + chunk)
    o_rec, S_rec = gdn.delta_rule_recurrent(q, k, v, g, beta, S0)
    o_chk, S_chk = gdn.delta_rule_chunked(q, k, v, g, beta, S0, chunk)
    assert o_rec.abs().max() > 0.1 and (S_rec - S0).abs().max() > 0.1
    assert (o_rec - o_chk).abs().max() <= 1e-10
    assert (S_rec - S_chk).abs().max() <= 1e-10


def test_one_update_stores_v_under_k():
    """beta = 1, no decay: afterwards S^T k reads back v exactly; beta in (0, 1) moves
    the read-out from m = S^T k to v by the fraction beta; the read-out o = S^T q comes
    from the updated state; a decay exp(g) scales S before the read of m."""
    q, k, v, _, _, S0 = rule_inputs(1, 4, 8, 6, seed=5)
    k = k / k.norm(dim=-1, keepdim=True)
    zero, one = torch.zeros(1, 4, dtype=F64), torch.ones(1, 4, dtype=F64)
    m = torch.einsum("hij,hi->hj", S0, k[0])
    assert (m - v[0]).abs().max() > 0.5
    o, S = gdn.delta_rule_recurrent(q, k, v, zero, one, S0)
    assert (torch.einsum("hij,hi->hj", S, k[0]) - v[0]).abs().max() <= 1e-12
    assert (o[0] - torch.einsum("hij,hi->hj", S, q[0])).abs().max() <= 1e-12
    beta = torch.tensor([[0.1, 0.25, 0.5, 0.9]], dtype=F64)
    _, S = gdn.delta_rule_recurrent(q, k, v, zero, beta, S0)
    got = torch.einsum("hij,hi->hj", S, k[0])
    assert (got - (m + beta[0][:, None] * (v[0] - m))).abs().max() <= 1e-12
    g = torch.tensor([[-0.1, -0.5, -1.0, -2.0]], dtype=F64)
    _, S = gdn.delta_rule_recurrent(q, k, v, g, beta, S0)
    md = torch.exp(g[0])[:, None] * m
    got = torch.einsum("hij,hi->hj", S, k[0])
    assert (got - (md + beta[0][:, None] * (v[0] - md))).abs().max() <= 1e-12
    # Orthogonal to k, the state only decays.
    x = torch.randn(4, 8, generator=gen(9), dtype=F64)
    x = x - (x * k[0]).sum(-1, keepdim=True) * k[0]
    assert ((torch.einsum("hij,hi->hj", S, x) - torch.exp(g[0])[:, None]
             * torch.einsum("hij,hi->hj", S0, x)).abs().max() <= 1e-12)


def test_l2norm_eps_sits_inside_the_sqrt():
    x = torch.full((4,), 1e-4, dtype=F64)
    assert torch.allclose(gdn.l2norm(x), x / math.sqrt(4e-8 + 1e-6), rtol=1e-14, atol=0)


def test_gated_norm_normalises_first_then_gates():
    g_ = gen(3)
    o = torch.randn(5, 2, 4, generator=g_, dtype=F64)
    z = torch.randn(5, 2, 4, generator=g_, dtype=F64)
    w = torch.randn(4, generator=g_, dtype=F64)
    want = w * o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-6) * z * torch.sigmoid(z)
    assert (gdn.gated_rmsnorm(o, z, w, 1e-6) - want).abs().max() <= 1e-12


# --- the block: mixer forms, state, head map ---------------------------------------------

def block_params(blk, D, seed):
    t = random_blocks.gdn_tensors("", blk, D, seed)
    return {k: v.to(F64) for k, v in t.items()}


def random_state(blk, seed):
    conv, S = gdn.new_state(blk)
    g_ = gen(seed)
    return (torch.randn(conv.shape, generator=g_, dtype=F64),
            torch.randn(S.shape, generator=g_, dtype=F64))


@pytest.mark.parametrize("T,chunk", [(1, 4), (13, 4), (29, 16), (70, 64), (40, 1)])
def test_mixer_chunked_equals_token_by_token_from_a_nonzero_state(T, chunk):
    D = 12
    blk = canonical.gdn_block(n_k_heads=2, n_v_heads=6, head_k_dim=5, head_v_dim=3, d_conv=3)
    p = block_params(blk, D, seed=T)
    u = torch.randn(T, D, generator=gen(T + 1), dtype=F64)
    state = random_state(blk, seed=T + 2)
    out_c, (conv_c, S_c) = gdn.gdn_mixer(u, p, blk, state, chunk=chunk)
    out_r, (conv_r, S_r) = gdn.gdn_mixer(u, p, blk, state, chunk=None)
    assert out_r.abs().max() > 0.01
    assert (out_c - out_r).abs().max() <= 1e-10
    assert (S_c - S_r).abs().max() <= 1e-10
    assert torch.equal(conv_c, conv_r)
    # The window holds the last K-1 pre-conv inputs, oldest first.
    xi = torch.cat([state[0].t(), u @ p["in_qkv.weight"].t()])
    assert torch.allclose(conv_c, xi[-2:].t(), rtol=0, atol=1e-12)
    # A different entering state changes the output: the state is really read.
    out_0, _ = gdn.gdn_mixer(u, p, blk, gdn.new_state(blk), chunk=chunk)
    assert (out_0 - out_c).abs().max() > 1e-3


def test_mixer_in_pieces_equals_whole():
    D = 16
    blk = canonical.gdn_block(n_k_heads=1, n_v_heads=3, head_k_dim=4, head_v_dim=6, d_conv=4)
    p = block_params(blk, D, seed=7)
    u = torch.randn(41, D, generator=gen(8), dtype=F64)
    state0 = random_state(blk, seed=9)
    whole, (cw, Sw) = gdn.gdn_mixer(u, p, blk, state0, chunk=8)
    state, outs = state0, []
    for a, b in ((0, 2), (2, 3), (3, 20), (20, 41)):
        o, state = gdn.gdn_mixer(u[a:b], p, blk, state, chunk=8)
        outs.append(o)
    assert (torch.cat(outs) - whole).abs().max() <= 1e-10
    assert (state[1] - Sw).abs().max() <= 1e-10 and torch.equal(state[0], cw)


def test_value_heads_read_key_heads_by_repeat_interleave():
    assert gdn.key_heads(4, 2).tolist() == [0, 0, 1, 1]
    assert gdn.key_heads(6, 3).tolist() == [0, 0, 1, 1, 2, 2]
    assert gdn.key_heads(4, 4).tolist() == [0, 1, 2, 3]


def test_head_map_is_what_the_step_form_comparison_checks(tmp_path, monkeypatch):
    """The reference agrees with an independent per-head step form; tiling value heads
    over key heads (h mod Hk) instead moves the logits far beyond the tolerance, in
    the reference and in the step form alike."""
    d = 16
    blocks = [random_any.block("gdn", d), random_any.block("mlp", d),
              random_any.block("gdn", d, n_k_heads=2, n_v_heads=6, head_k_dim=3,
                               head_v_dim=5, d_conv=3)]
    model = tmp_path / "m"
    random_blocks.write_random_model(model, config(blocks, d_model=d), seed=11)
    ref = ReferenceModel.load(model, F64).forward(TOKENS)
    step = step_logits(model, TOKENS)
    assert ref.std() > 0.1
    assert (ref - step).abs().max() <= 1e-10
    tiled = step_logits(model, TOKENS, key_head=lambda h, Hk, Hv: h % Hk)
    assert (tiled - ref).abs().max() > 1e-3
    with monkeypatch.context() as m:
        m.setattr(gdn, "key_heads", lambda Hv, Hk: torch.arange(Hv) % Hk)
        ref_tiled = ReferenceModel.load(model, F64).forward(TOKENS)
    assert (ref_tiled - ref).abs().max() > 1e-3
    assert (ref_tiled - tiled).abs().max() <= 1e-10


# --- random gdn models through the reference model ---------------------------------------

@pytest.mark.parametrize("d", [16, 32])
def test_random_any_gdn_model_prefill_in_chunks_equals_token_by_token(tmp_path, d):
    blocks = [random_any.block("gdn", d), random_any.block("mlp", d),
              random_any.block("gdn", d, n_k_heads=1, n_v_heads=3, d_conv=2),
              random_any.block("moe", d)]
    random_any.write_model(tmp_path / "m", blocks, d, seed=4)
    cfg, tensors, _ = canonical.load_model_dir(tmp_path / "m")
    canonical.check_tensors(cfg, tensors)
    b = cfg["blocks"][0]
    assert (b["n_k_heads"], b["n_v_heads"], b["head_k_dim"], b["head_v_dim"], b["d_conv"]) \
        == (2, 4, d // 4, d // 4, 4)
    assert b["norm"] == {"type": "rmsnorm", "eps": 1e-6}
    assert (tensors["blocks.0.A"] < 0).all() and tensors["blocks.0.A"].dtype == torch.float32
    m = ReferenceModel.load(tmp_path / "m", F64)
    whole = m.forward(TOKENS)
    assert whole.std() > 0.1
    chunks, state = [], None
    for i in range(0, len(TOKENS), 3):
        logits, state = m.forward_with_state(TOKENS[i:i + 3], state)
        chunks.append(logits)
    steps, state = [], m.new_state()
    for tok in TOKENS:
        logits, state = m.forward_with_state([tok], state)
        steps.append(logits)
    chunks, steps = torch.cat(chunks), torch.cat(steps)
    assert (chunks - steps).abs().max() <= 1e-10
    assert (whole - steps).abs().max() <= 1e-10
    assert (step_logits(tmp_path / "m", TOKENS) - steps).abs().max() <= 1e-10
    # Restarting every chunk from a fresh state does not give these logits.
    fresh = torch.cat([m.forward(TOKENS[i:i + 3]) for i in range(0, len(TOKENS), 3)])
    assert (fresh - steps).abs().max() > 1e-3


def test_random_gdn_decays_stay_in_range(tmp_path):
    random_any.write_model(tmp_path / "m", [random_any.block("gdn", 32)], 32, seed=0)
    _, t, _ = canonical.load_model_dir(tmp_path / "m")
    A = t["blocks.0.A"].double()
    assert (A < 0).all() and (A > -1).all()
    assert t["blocks.0.dt_bias"].abs().max() <= 0.5
    cfg = config([random_any.block("gdn", 16)])
    t = random_blocks.random_tensors(cfg, seed=2)
    assert (t["blocks.0.A"] < 0).all() and t["blocks.0.A"].dtype == torch.float32


def test_reference_model_state_form_refuses_kinds_without_one(tmp_path):
    random_any.write_model(tmp_path / "m", [random_any.block("gdn", 32),
                                            random_any.block("mamba2", 64)], 32, seed=0)
    m = ReferenceModel.load(tmp_path / "m", F64)
    with pytest.raises(NotImplementedError, match="blocks\\[1\\] kind 'mamba2'"):
        m.new_state()

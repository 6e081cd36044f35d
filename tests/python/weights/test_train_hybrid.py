"""The hybrid's training-time blocks compute exactly what weights/reference computes.

Each trainable block exports canonical tensors; the reference forward on those
tensors must equal the training forward (float64, random weights and inputs),
including the attention sink rule beyond sinks + window tokens, the MoE's grouped
dispatch and the S4D FFT kernel.
"""


import pytest
import torch

from weights import canonical
from weights.reference import attention as attn_ref
from weights.reference import mamba as mamba_ref
from weights.reference import moe as moe_ref
from weights.reference import s4d as s4d_ref
from weights.reference import seqboat as seqboat_ref
from weights.reference.model import ReferenceModel
from weights.training import train_hybrid as th


def _randomise(module, scale=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return module


def _check_block(block, ref_fn, T=40, B=2, d=32, tol=1e-10, seed=0):
    block = block.double()
    g = torch.Generator().manual_seed(seed + 1)
    r = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    with torch.no_grad():
        mine = block(r)
        p = {k: v.detach() for k, v in block.tensors().items()}
        cfg = {"d_model": d}
        for b in range(B):
            ref = ref_fn(r[b], p, block.config(), cfg)
            assert torch.allclose(mine[b], ref, atol=tol, rtol=0), (mine[b] - ref).abs().max()
    # The exported tensors have the canonical names and shapes.
    shapes = canonical.BLOCK_SHAPES[block.kind]("", block.config(), d)
    shapes.update(canonical.norm_shapes("norm.", block.config()["norm"], d))
    assert {k: tuple(v.shape) for k, v in block.tensors().items()} == shapes


@pytest.mark.parametrize("sinks,window,T", [(2, 5, 40), (4, 64, 150), (0, 7, 30), (3, 50, 20)])
def test_attention_training_form_matches_sink_cache_reference(sinks, window, T):
    torch.manual_seed(0)
    blk = th.AttentionBlock(32, n_heads=4, n_kv_heads=2, head_dim=8, sinks=sinks, window=window)
    _check_block(_randomise(blk), attn_ref.attention_block, T=T)


def test_sink_attention_chunking_is_exact():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 300, 4, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, 300, 2, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, 300, 2, 8, generator=g, dtype=torch.float64)
    a = th.sink_attention(q, k, v, 4, 64, 10000.0, chunk=17)
    b = th.sink_attention(q, k, v, 4, 64, 10000.0, chunk=300)
    assert torch.allclose(a, b, atol=1e-12)


def test_moe_grouped_dispatch_matches_per_token_reference():
    torch.manual_seed(1)
    blk = _randomise(th.MoEBlock(32, n_experts=4, d_ff=16), scale=1.0)
    _check_block(blk, moe_ref.moe_block, T=50)
    # All experts are used on random input, so every group path ran.
    with torch.no_grad():
        x = blk.norm(torch.randn(200, 32, dtype=torch.float64))
        used = blk.router(x).argmax(-1).unique()
    assert len(used) == 4


def test_moe_gate_and_aux_loss_have_gradients():
    torch.manual_seed(2)
    blk = th.MoEBlock(16, n_experts=4, d_ff=8)
    out = blk(torch.randn(2, 30, 16))
    (out.square().sum() + blk.aux).backward()
    assert blk.router.weight.grad.abs().sum() > 0
    assert blk.aux.item() >= 1.0 - 1e-6          # X * sum f_i P_i >= 1 (equality when balanced)


def test_s4d_fft_training_form_matches_reference_kernel():
    torch.manual_seed(3)
    blk = th.S4DBlock(32, modes=8)
    with torch.no_grad():
        blk.C.mul_(3.0)
        blk.log_dt.add_(1.0)            # larger steps: the kernel decays within T
    _check_block(blk, s4d_ref.s4d_block, T=60, tol=1e-9)


def test_s4d_discretisation_is_zoh():
    torch.manual_seed(4)
    blk = th.S4DBlock(4, modes=2).double()
    dtA, dA, Cb = blk.discrete()
    A = torch.complex(-torch.exp(blk.log_A_real), blk.A_imag)
    dt = torch.exp(blk.log_dt)[:, None]
    C = torch.view_as_complex(blk.C)
    assert torch.allclose(dA, torch.exp(dt * A))
    assert torch.allclose(Cb, C * (torch.exp(dt * A) - 1) / A)
    assert (dA.abs() < 1).all()


def test_mamba_block_matches_reference():
    torch.manual_seed(5)
    _check_block(th.Mamba1Block(32, d_state=8), mamba_ref.mamba1_block, T=45, tol=1e-9)


def test_seqboat_block_is_reference_layer_and_confidence_carries_gradient():
    torch.manual_seed(6)
    blk = _randomise(th.SeqBoatBlock(32, ema_dim=4, z_dim=8, v_dim=16, window=5), scale=0.2)
    _check_block(blk, seqboat_ref.seqboat_block, T=40)
    blk = blk.float()
    r = torch.randn(2, 40, 32)
    with torch.no_grad():
        _, idx, u = seqboat_ref.seqboat_layer(r[0], blk.tensors(), blk.config())
    assert 0 < idx.numel() < 40                       # some tokens routed each way
    blk(r).sum().backward()
    assert blk.temp.grad.abs().item() > 0             # through c_t = softmax(u / tau)[1]
    assert blk.hx_proj.weight.grad[:2].abs().sum() > 0
    assert blk.mx_proj.weight.grad.abs().sum() > 0


def test_seqboat_derived_tensors_follow_the_converter_rules():
    blk = th.SeqBoatBlock(8, ema_dim=4, z_dim=4, v_dim=8, window=3)
    p = blk.tensors()
    s = torch.sigmoid(blk.delta)
    assert torch.allclose(p["ema.in_coef"], s * blk.beta)
    assert torch.allclose(p["ema.decay"], 1 - s * torch.sigmoid(blk.alpha))
    assert torch.allclose(p["ema.out_coef"], blk.gamma / 2.0)
    assert torch.allclose(p["router.temperature"], torch.exp(blk.temp))
    assert torch.equal(p["router.weight"], blk.hx_proj.weight[:2])
    assert torch.equal(p["hx.weight"], blk.hx_proj.weight[2:])


def test_mlp_block_matches_reference():
    from weights.reference import mlp as mlp_ref
    torch.manual_seed(7)
    _check_block(th.MLPBlock(32, d_ff=24), mlp_ref.mlp_block, T=10)


def test_whole_hybrid_exports_a_canonical_model_equal_to_the_reference():
    torch.manual_seed(8)
    blocks = {"seqboat": dict(ema_dim=4, z_dim=8, v_dim=16, window=4),
              "attention": dict(n_heads=4, n_kv_heads=2, head_dim=8, sinks=2, window=6),
              "moe": dict(n_experts=3, d_ff=16), "s4d": dict(modes=4), "mlp": dict(d_ff=32),
              "mamba1": dict(d_state=4)}
    model = th.HybridLM(th.HYBRID_STACK, d_model=32, block_args=blocks)
    _randomise(model, scale=0.05)
    cfg, tensors = model.config("t"), model.canonical()
    canonical.check_tensors(cfg, tensors)
    # Every kind but mamba2, gdn and Falcon-H1's parallel block, which the training code
    # has no block for.
    assert {b["kind"] for b in cfg["blocks"]} == set(canonical.BLOCK_SHAPES) - {
        "mamba2", "gdn", "parallel_mamba2_attention"}
    tokens = [256] + list(b"Hello, sinks and windows and experts.")
    ref = ReferenceModel(cfg, tensors, torch.float64).forward(tokens)
    model = model.double()
    with torch.no_grad():
        mine = model(torch.tensor([tokens]))[0]
    # The export rounds derived recurrence tensors (A, dA, ...) to fp32.
    assert (mine - ref).abs().max() < 1e-4


def test_lr_schedule_warms_up_then_decays_to_min():
    a = th.parse_args(["--out", "x", "--lr", "1e-3", "--warmup-steps", "10"])
    assert th.lr_at(0, 100, a) == pytest.approx(1e-4)
    assert th.lr_at(10, 100, a) == pytest.approx(1e-3)
    assert th.lr_at(100, 100, a) == pytest.approx(1e-4)
    assert all(th.lr_at(s, 100, a) >= th.lr_at(s + 1, 100, a) for s in range(10, 100))


def test_same_parameter_count_for_fair_baseline():
    hyb = th.build(th.parse_args(["--out", "x"]))
    mam = th.build(th.parse_args(["--out", "x", "--stack", "mamba"]))
    n_h = sum(p.numel() for p in hyb.parameters())
    n_m = sum(p.numel() for p in mam.parameters())
    assert abs(n_h - n_m) / n_m < 0.02
    assert n_h * 4 < 8 * 1024 * 1024

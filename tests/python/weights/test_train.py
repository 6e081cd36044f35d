"""The training-side model: its scan, its HF layout, its conversion, its data."""

import math
import os

import numpy as np
import pytest
import torch

from weights import convert
from weights.reference.model import ReferenceModel
from weights.training import fortunes, train, train_eval
from weights.training.train_model import MambaLM, generate
from weights.training.train_scan import selective_scan


def plain_scan(delta, A, Bm, Cm, x):
    """The textbook loop, differentiated by autograd."""
    h = torch.zeros(x.shape[0], x.shape[2], A.shape[1], dtype=x.dtype)
    ys = []
    for t in range(x.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * x[:, t])[:, :, None] * Bm[:, t, None, :]
        ys.append((h * Cm[:, t, None, :]).sum(-1))
    return torch.stack(ys, 1)


def scan_inputs(B=2, T=13, E=5, N=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    f = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    return [(torch.rand(B, T, E, generator=g, dtype=torch.float64) * 0.9 + 0.05).requires_grad_(),
            (-torch.rand(E, N, generator=g, dtype=torch.float64) * 4 - 0.1).requires_grad_(),
            f(B, T, N).requires_grad_(), f(B, T, N).requires_grad_(), f(B, T, E).requires_grad_()]


@pytest.mark.parametrize("chunk", [1, 4, 13, 32])
def test_scan_forward_and_gradients_match_plain_loop(chunk):
    args = scan_inputs()
    y = selective_scan(*args, chunk=chunk)
    y_ref = plain_scan(*args)
    assert torch.allclose(y, y_ref, rtol=0, atol=1e-12)
    w = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    g = torch.autograd.grad((y * w).sum(), args)
    g_ref = torch.autograd.grad((y_ref * w).sum(), args)
    for name, a, b in zip(["delta", "A", "B", "C", "x"], g, g_ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10), name


def test_scan_gradcheck():
    args = scan_inputs(B=1, T=6, E=2, N=2, seed=3)
    assert torch.autograd.gradcheck(lambda *a: selective_scan(*a, chunk=4), args)


def small_model(seed=0):
    torch.manual_seed(seed)
    m = MambaLM(d_model=32, n_layers=2, d_state=4, chunk=8).double()
    # Move away from the init's constants (D = 1, zero-ish head) so every tensor matters.
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
        m.backbone.embeddings.weight.mul_(20)
    return m


def test_trained_module_converts_to_the_same_function(tmp_path):
    m = small_model()
    train.save_hf(m.float(), str(tmp_path / "hf"))
    m.double()
    convert.convert("hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out"), "f32", byte_tokenizer=True)
    ref = ReferenceModel.load(tmp_path / "out", torch.float64)
    seqs = torch.tensor([[256, 72, 105, 33, 10, 256, 7, 200, 65, 66, 67, 68, 32, 70, 71, 72, 73, 9, 1],
                         [256, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]])
    with torch.no_grad():
        mine = m(seqs)
    for k in range(2):
        want = ref.forward(seqs[k])
        assert want.std() > 0.5
        # The HF file is fp32, so compare at fp32 resolution.
        assert torch.allclose(mine[k], want, rtol=0, atol=1e-4), (mine[k] - want).abs().max()


def test_greedy_generation_follows_reference_argmax(tmp_path):
    m = small_model(1).float()
    train.save_hf(m, str(tmp_path / "hf"))
    convert.convert("hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out"), "f32", byte_tokenizer=True)
    ref = ReferenceModel.load(tmp_path / "out", torch.float64)
    prompt = [256, 84, 104, 101]
    gen = generate(m, prompt, 12, temperature=1e-4, seed=0)
    seq = list(prompt)
    for tok in gen:
        assert tok == int(ref.forward(seq)[-1, :257].argmax())
        seq.append(tok)


def write_fortune_dir(d):
    os.makedirs(d)
    (d / "jokes").write_bytes(b"First one.\n%\n\nSecond\n\tindented\n%\n%\nThird %x\n")
    (d / "jokes.dat").write_bytes(b"\x00\x01binary")
    os.symlink("jokes", d / "jokes.u8")
    (d / "more").write_bytes(b"Fourth\n")     # no trailing %


def test_read_fortunes(tmp_path):
    write_fortune_dir(tmp_path / "f")
    got = fortunes.read_fortunes(str(tmp_path / "f"))
    assert got == [b"First one.", b"Second\n\tindented", b"Third %x", b"Fourth"]


def test_stream_split_and_unigram():
    s = fortunes.to_stream([b"ab", b"c"])
    assert s.tolist() == [256, 97, 98, 256, 99, 256]
    texts = [f"fortune {i}".encode() for i in range(2000)]
    train_f, held = fortunes.split(texts)
    assert 60 < len(held) < 140 and len(train_f) + len(held) == 2000
    assert fortunes.split(list(reversed(texts)))[1] == list(reversed(held))   # order-independent
    # unigram over {256: 2, 97: 1} + add-one over 257 symbols
    bits = fortunes.unigram_bits(np.array([256, 97, 256]), np.array([97]))
    assert math.isclose(bits, -math.log2(2 / 260))


def test_held_out_bits_ignores_padding():
    m = small_model(2).float()
    held = [b"short", b"a longer fortune\nwith two lines", b"mid size"]
    batched, n = train_eval.held_out_bits(m, held, max_tokens=10**6)
    assert n == sum(len(t) + 1 for t in held)
    one_by_one = 0.0
    for t in held:
        b, k = train_eval.held_out_bits(m, [t])
        one_by_one += b * k
    assert math.isclose(batched, one_by_one / n, rel_tol=1e-5)

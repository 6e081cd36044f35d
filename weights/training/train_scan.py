"""Selective scan for CPU training: a hand-written autograd Function.

Autograd through a scan expressed with tensor ops materialises several
[B, T, E, N] tensors per layer (hundreds of MB each at training sizes) and the
CPU spends its time streaming them through memory. This Function instead walks
time with per-step [B, E, N] working sets that stay in cache, keeps only the
state at every `chunk`-th step, and in backward recomputes each chunk's states
from its checkpoint before running the adjoint recurrence over it in reverse.

Forward:   a_t = exp(delta_t (x) A),  h_t = a_t * h_{t-1} + (delta_t x_t) (x) B_t,
           y_t = h_t . C_t                      (MODELS.md 1.4, h_{-1} = 0)
Backward:  g_t = dy_t (x) C_t + a_{t+1} * g_{t+1}      (dL/dh_t)
           dC_t = sum_e dy_t h_t,  dB_t = sum_e g_t (delta_t x_t),
           d(delta_t x_t) = g_t . B_t,  dlog a_t = g_t * h_{t-1} * a_t,
           ddelta_t += sum_n dlog a_t * A,  dA += sum_{b,t} dlog a_t * delta_t.
It is verified against the full-sequence reference and against autograd of a
plain loop in tests/python/weights/test_train_scan.py.
"""

import torch


def _chunk_inputs(delta, A, Bm, u, t0, t1):
    """Decays a_t and inputs b_t for steps t0..t1-1, each [B, L, E, N]."""
    a = torch.exp(delta[:, t0:t1, :, None] * A)
    b = u[:, t0:t1, :, None] * Bm[:, t0:t1, None, :]
    return a, b


class SelectiveScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, delta, A, Bm, Cm, x, chunk):
        Bsz, T, E = x.shape
        N = A.shape[1]
        h = x.new_zeros(Bsz, E, N)
        y = x.new_empty(Bsz, T, E)
        checkpoints = []
        u = delta * x
        hs = x.new_empty(Bsz, min(chunk, T), E, N)
        for t0 in range(0, T, chunk):
            t1 = min(T, t0 + chunk)
            checkpoints.append(h)
            a, b = _chunk_inputs(delta, A, Bm, u, t0, t1)
            for k in range(t1 - t0):     # the only sequential part: two fused ops a step
                h = torch.addcmul(b[:, k], a[:, k], h, out=hs[:, k])
            h = h.clone()
            y[:, t0:t1] = torch.einsum("blen,bln->ble", hs[:, :t1 - t0], Cm[:, t0:t1])
        ctx.chunk = chunk
        ctx.save_for_backward(delta, A, Bm, Cm, x, torch.stack(checkpoints))
        return y

    @staticmethod
    def backward(ctx, dy):
        delta, A, Bm, Cm, x, checkpoints = ctx.saved_tensors
        chunk = ctx.chunk
        Bsz, T, E = x.shape
        N = A.shape[1]
        dy = dy.contiguous()
        u = delta * x
        ddelta = torch.empty_like(delta)
        dx = torch.empty_like(x)
        dB = torch.empty_like(Bm)
        dC = torch.empty_like(Cm)
        dA = torch.zeros_like(A)
        g_next = x.new_zeros(Bsz, E, N)         # a_{t+1} * g_{t+1}
        L = min(chunk, T)
        hs = x.new_empty(Bsz, L + 1, E, N)      # hs[:, k] = h_{t0+k-1}
        gs = x.new_empty(Bsz, L, E, N)
        for c in reversed(range(len(checkpoints))):
            t0, t1 = c * chunk, min(T, (c + 1) * chunk)
            n = t1 - t0
            a, b = _chunk_inputs(delta, A, Bm, u, t0, t1)
            hs[:, 0] = checkpoints[c]
            for k in range(n):           # recompute this chunk's states
                torch.addcmul(b[:, k], a[:, k], hs[:, k], out=hs[:, k + 1])
            dyC = dy[:, t0:t1, :, None] * Cm[:, t0:t1, None, :]
            for k in reversed(range(n)):     # adjoint recurrence, two ops a step
                g = torch.add(dyC[:, k], g_next, out=gs[:, k])
                g_next = a[:, k] * g
            g, h, h_prev = gs[:, :n], hs[:, 1:n + 1], hs[:, :n]
            dC[:, t0:t1] = torch.einsum("ble,blen->bln", dy[:, t0:t1], h)
            dB[:, t0:t1] = torch.einsum("ble,blen->bln", u[:, t0:t1], g)
            du = torch.einsum("blen,bln->ble", g, Bm[:, t0:t1])
            dlog_a = g * h_prev * a
            ddelta[:, t0:t1] = torch.einsum("blen,en->ble", dlog_a, A) + du * x[:, t0:t1]
            dx[:, t0:t1] = du * delta[:, t0:t1]
            dA += torch.einsum("blen,ble->en", dlog_a, delta[:, t0:t1])
        return ddelta, dA, dB, dC, dx, None


def selective_scan(delta, A, Bm, Cm, x, chunk=32):
    """y [B, T, E] for delta, x [B, T, E], A [E, N], Bm, Cm [B, T, N]; zero initial state."""
    return SelectiveScan.apply(delta.contiguous(), A.contiguous(), Bm.contiguous(),
                               Cm.contiguous(), x.contiguous(), chunk)

"""The optimisation both training scripts (weights/training/train.py, weights/training/train_hybrid.py) run.

AdamW (0.9, 0.95) on random windows of seq_len + 1 tokens of the train stream,
gradient clipping, and a linear warm-up then cosine decay to min-lr-frac x lr.
What the cosine runs over is each script's own choice (wall-clock fraction or
step count), so the schedule takes that fraction as an argument.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


def add_optimizer_args(ap):
    """The command-line options the window sampling, schedule and step below read."""
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)


def warmup_cosine_lr(a, step, frac):
    """Linear warm-up over a.warmup_steps, then cosine decay over frac in [0, 1]."""
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * cos)


class WindowTrainer:
    """Optimiser steps on random windows of `stream` (int64 numpy), seeded by a.seed.

    extra_loss: None, or a function called after the forward pass whose result
    is added to the loss that is differentiated (e.g. a load-balancing term);
    the EMA follows the cross-entropy alone.
    """

    def __init__(self, model, param_groups, stream, a, extra_loss=None):
        self.model, self.a, self.extra_loss = model, a, extra_loss
        self.stream = torch.from_numpy(stream)
        self.rng = np.random.default_rng(a.seed)
        self.opt = torch.optim.AdamW(param_groups, lr=a.lr, betas=(0.9, 0.95))
        self.ema = None                     # EMA of the train loss, nats per token

    def step(self, lr):
        """One optimiser step at learning rate lr; returns the number of targets seen."""
        a = self.a
        for g in self.opt.param_groups:
            g["lr"] = lr
        starts = self.rng.integers(0, len(self.stream) - a.seq_len - 1, a.batch)
        batch = torch.stack([self.stream[s:s + a.seq_len + 1] for s in starts])
        logits = self.model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        total = loss if self.extra_loss is None else loss + self.extra_loss()
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.clip)
        self.opt.step()
        self.ema = loss.item() if self.ema is None else 0.95 * self.ema + 0.05 * loss.item()
        return batch[:, 1:].numel()

    def ema_bits(self):
        """The loss EMA in bits per byte."""
        return self.ema / math.log(2)

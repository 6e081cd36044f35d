"""How both training scripts judge a trained module: held-out bits per byte, the
written model directory's logits against the module's, and samples after fixed
prompts (with their TRAINING.md form)."""

import math

import torch
import torch.nn.functional as F

from weights.training import fortunes

PROMPTS = ["", "The ", "Q: What ", "A man "]


@torch.no_grad()
def held_out_bits(model, held, max_tokens=8192):
    """Mean bits per target over held-out fortunes, each read as EOS + text -> text + EOS.

    Every fortune starts from a fresh state, as a served request would.
    Returns (bits per target, number of targets).
    """
    seqs = sorted((fortunes.to_stream([t]) for t in held), key=len)
    total, count, i = 0.0, 0, 0
    while i < len(seqs):
        j = i + 1
        while j < len(seqs) and (j - i + 1) * len(seqs[j]) <= max_tokens:
            j += 1
        group = seqs[i:j]
        T = max(len(s) for s in group) - 1
        inp = torch.full((len(group), T), fortunes.EOS, dtype=torch.long)
        tgt = torch.full((len(group), T), -100, dtype=torch.long)
        for k, s in enumerate(group):
            inp[k, :len(s) - 1] = torch.from_numpy(s[:-1])
            tgt[k, :len(s) - 1] = torch.from_numpy(s[1:])
        logits = model(inp)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                 ignore_index=-100, reduction="sum").item()
        count += int((tgt != -100).sum())
        i = j
    return total / count / math.log(2), count


def logit_diff(model, out_dir, text):
    """Max |logit difference| over EOS + text of the canonical directory out_dir
    (reference, f64) vs the trained module (f64); the module is left in fp32."""
    from weights.reference.model import ReferenceModel
    tokens = [fortunes.EOS] + list(text)
    ref = ReferenceModel.load(out_dir, torch.float64).forward(tokens)
    model.double()
    with torch.no_grad():
        mine = model(torch.tensor([tokens]))[0]
    model.float()
    return float((ref - mine).abs().max())


def samples(generate, model, n_new, seed):
    """[(prompt, text)]: `generate` at temperature 0.8 after EOS + each prompt,
    seeded seed + its index."""
    out = []
    for k, p in enumerate(PROMPTS):
        gen = generate(model, [fortunes.EOS] + list(p.encode()), n_new, 0.8, seed + k)
        out.append((p, bytes(gen).decode("utf-8", errors="replace")))
    return out


def samples_md(samp):
    """TRAINING.md lines showing each sample as prompt + text in a code block."""
    lines = []
    for p, s in samp:
        lines += [f"Prompt `{p!r}`:", "", "```", p + s, "```", ""]
    return lines

"""Write the reference's full-sequence logits [T, V] for a token list to a .npy file.

    python -m weights.reference.logits --model DIR --tokens 1,2,3 --out FILE.npy [--float64]

C++ parity tests driven from pytest call this and compare against the engine.
Without --float64 the reference computes in float32 and writes float32.
"""

import argparse
import sys

import numpy as np
import torch

from weights.reference.model import ReferenceModel


def parse_tokens(text):
    try:
        tokens = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--tokens must be comma-separated integers, got {text!r}") from None
    if not tokens:
        raise ValueError("--tokens is empty")
    return tokens


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="canonical model directory")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output .npy path")
    ap.add_argument("--float64", action="store_true", help="compute and write in float64")
    a = ap.parse_args(argv)
    dtype = torch.float64 if a.float64 else torch.float32
    try:
        tokens = parse_tokens(a.tokens)
        model = ReferenceModel.load(a.model, dtype)
        V = model.config["vocab_size"]
        bad = [t for t in tokens if not 0 <= t < V]
        if bad:
            raise ValueError(f"token ids out of range [0, {V}): {bad}")
        logits = model.forward(tokens)
    except (ValueError, OSError) as e:
        print(f"logits: {e}", file=sys.stderr)
        return 1
    np.save(a.out, logits.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())

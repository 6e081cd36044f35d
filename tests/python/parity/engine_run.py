"""Running the engine's logits tool from the parity tests, and their token lists."""

import subprocess

import numpy as np


def tokens(n, seed):
    """n token ids drawn from the byte vocabulary plus EOS, seeded."""
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, 257, size=n)]


def run_engine(binary, model, toks, out, chunk, state_out=None):
    """The engine's logits [T, V] for toks fed `chunk` tokens per step; with
    state_out, the sequence's final state is written there too."""
    cmd = [str(binary), "--model", str(model), "--tokens", ",".join(map(str, toks)),
           "--out", str(out), "--chunk", str(chunk)]
    if state_out:
        cmd += ["--state_out", str(state_out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"engine_logits failed ({proc.returncode}): {proc.stderr}")
    return np.load(out)

"""Running the converter and the engine's logits and generate tools from the parity
tests, and their token lists."""

import subprocess
import sys

import numpy as np


def tokens(n, seed):
    """n token ids drawn from the byte vocabulary plus EOS, seeded."""
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, 257, size=n)]


def convert(root, source, src, out, *extra):
    """`python -m weights.convert --source source src out --byte-tokenizer *extra`,
    run from the repository root; fails the test with the converter's stderr."""
    proc = subprocess.run([sys.executable, "-m", "weights.convert", "--source", source,
                           str(src), str(out), "--byte-tokenizer", *extra],
                          cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


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


def engine_greedy(binary, model, prompt, n):
    """The engine's greedy continuation of `prompt`: n token ids, prefilled in
    chunks of a 16-token step budget."""
    proc = subprocess.run([str(binary), "--model", str(model),
                           "--tokens", ",".join(map(str, prompt)),
                           "--max_new_tokens", str(n), "--budget", "16"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"engine_generate failed ({proc.returncode}): {proc.stderr}")
    return [int(t) for t in proc.stdout.strip().split(",")]

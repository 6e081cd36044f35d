"""Check a trained canonical model in the C++ engine: logits vs the reference, greedy text.

    python -m weights.training.train_engine_check --model weights/models/default [--md OUT.md]

Runs bazel-bin/tests/parity/engine_logits on the first 256 bytes of a held-out
fortune (after EOS), decoding token by token and in chunks of 16, and compares
with the float64 reference forward; then prints the engine's greedy continuation
of a few prompts (bazel-bin/tests/parity/engine_generate, temperature 0).
Build first: bazel build //tests/parity:engine_logits //tests/parity:engine_generate
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from weights.reference.model import ReferenceModel
from weights.training import fortunes

BIN = "bazel-bin/tests/parity"
PROMPTS = ["The ", "Q: What is ", "A man "]


def held_out_text(n=256):
    _, held = fortunes.split(fortunes.read_fortunes())
    text = next(t for t in held if len(t) >= n)
    return text[:n]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--md", default=None, help="write a markdown section here")
    ap.add_argument("--new-tokens", type=int, default=200)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    text = held_out_text()
    tokens = [fortunes.EOS] + list(text)
    ref = ReferenceModel.load(a.model, torch.float64).forward(tokens).numpy()
    lines = ["## Engine check (`python -m weights.training.train_engine_check`)", "",
             f"Held-out text ({len(text)} bytes, after EOS): `{text[:60]!r}...`", "",
             "| engine mode | max abs logit diff vs reference (f64) | argmax agreement |",
             "|---|---|---|"]
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        for chunk in (1, 16):
            subprocess.run([f"{BIN}/engine_logits", "--model", a.model, "--tokens",
                            ",".join(map(str, tokens)), "--out", out, "--chunk", str(chunk)],
                           check=True)
            eng = np.load(out)[:, :ref.shape[1]]
            diff = float(np.abs(eng - ref).max())
            worst = max(worst, diff)
            agree = float((eng.argmax(1) == ref.argmax(1)).mean())
            print(f"chunk {chunk}: max abs diff {diff:.2e}, argmax agreement {agree:.3f}")
            lines.append(f"| chunk {chunk} | {diff:.2e} | {agree:.3f} |")
    lines += ["", "Greedy continuations from the engine (`engine_generate --temperature 0`):", ""]
    for p in PROMPTS:
        ids = [fortunes.EOS] + list(p.encode())
        res = subprocess.run([f"{BIN}/engine_generate", "--model", a.model, "--tokens",
                              ",".join(map(str, ids)), "--max_new_tokens", str(a.new_tokens),
                              "--temperature", "0"], check=True, capture_output=True, text=True)
        gen = [int(x) for x in res.stdout.strip().split(",") if x]
        if fortunes.EOS in gen:
            gen = gen[:gen.index(fortunes.EOS)]
        s = p + bytes(t for t in gen if t < 256).decode("utf-8", errors="replace")
        print(f"--- greedy after {p!r}:\n{s}\n")
        lines += [f"Prompt `{p!r}`:", "", "```", s, "```", ""]
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    ok = worst <= 1e-3
    print("engine vs reference:", "OK" if ok else "FAIL", f"(worst {worst:.2e}, limit 1e-3)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

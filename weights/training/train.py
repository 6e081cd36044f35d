"""Train the bundled byte-level Mamba-1 model on Debian's fortunes, then convert it.

    python -m weights.training.train [--out weights/models/default] [--time-budget 1560] ...

Steps: read fortunes, hold out ~5% (hash split), train with AdamW on random
windows of the EOS-joined train stream, evaluate held-out bits per byte next to
a unigram baseline, save an HF `MambaForCausalLM` checkpoint, convert it with
weights.convert into OUT, check the converted model against the reference, and
write OUT/TRAINING.md.

The learning-rate schedule runs on the fraction of --time-budget spent (not on a
step count) because the machine is shared: the run always ends on time, at the
cost of the step count depending on machine load (it is recorded).
"""

import argparse
import json
import os
import shlex
import shutil
import sys
import time

import torch

from weights import convert, safetensors_io
from weights.training import fortunes, train_eval, train_loop
from weights.training.train_model import MambaLM, generate


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="weights/models/default")
    ap.add_argument("--hf-out", default="/tmp/seqboat-train/hf",
                    help="where the intermediate HF checkpoint goes")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-layers", type=int, default=6)
    ap.add_argument("--d-state", type=int, default=16)
    ap.add_argument("--expand", type=int, default=2)
    train_loop.add_optimizer_args(ap)
    ap.add_argument("--time-budget", type=float, default=1560.0, help="training seconds")
    ap.add_argument("--max-steps", type=int, default=0, help="stop earlier (0 = no limit)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fortune-dir", default=fortunes.FORTUNE_DIR)
    return ap.parse_args(argv)


def param_groups(model, wd):
    """Weight decay on projection matrices only (not embedding, norms, A_log, D, biases)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_proj = name.endswith(".weight") and p.dim() >= 2 and "embeddings" not in name
        (decay if is_proj and "conv1d" not in name else no_decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def save_hf(model, hf_dir):
    """HF save_pretrained layout: config.json + model.safetensors (tied lm_head omitted)."""
    if os.path.exists(hf_dir):
        shutil.rmtree(hf_dir)
    os.makedirs(hf_dir)
    with open(os.path.join(hf_dir, "config.json"), "w") as f:
        json.dump(model.hf_config(), f, indent=2)
    safetensors_io.save_file(model.hf_state_dict(), os.path.join(hf_dir, "model.safetensors"),
                             {"format": "pt"})


def train(a):
    torch.manual_seed(a.seed)
    data = fortunes.load_corpus(a.fortune_dir)
    print(f"data: {len(data.train)} train fortunes ({len(data.stream)} tokens), "
          f"{len(data.held)} held out ({data.n_held_targets} targets); "
          f"unigram {data.unigram:.3f} bits/byte", flush=True)

    model = MambaLM(d_model=a.d_model, n_layers=a.n_layers, d_state=a.d_state, expand=a.expand)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)
    trainer = train_loop.WindowTrainer(model, param_groups(model, a.weight_decay), data.stream, a)

    # The cosine runs over the fraction of --time-budget spent (module docstring).
    t0 = time.time()
    step, tokens = 0, 0
    while True:
        frac = (time.time() - t0) / a.time_budget
        if frac >= 1.0 or (a.max_steps and step >= a.max_steps):
            break
        lr = train_loop.warmup_cosine_lr(a, step, frac)
        tokens += trainer.step(lr)
        step += 1
        if step % 20 == 0:
            print(f"step {step} t={time.time() - t0:.0f}s lr={lr:.2e} "
                  f"loss={trainer.ema_bits():.3f} bits/byte tokens={tokens}", flush=True)
    train_time = time.time() - t0
    model.eval()
    bpb, n_targets = train_eval.held_out_bits(model, data.held)
    print(f"held-out: {bpb:.3f} bits/byte over {n_targets} targets (unigram {data.unigram:.3f})",
          flush=True)
    return model, dict(n_params=n_params, steps=step, tokens=tokens, train_time=train_time,
                       final_train_bits=trainer.ema_bits(), bpb=bpb, unigram=data.unigram,
                       n_targets=n_targets, n_train=len(data.train), n_held=len(data.held),
                       train_tokens=len(data.stream))


def training_md(a, stats, argv, wall, diff, samp, size):
    hp = {k: v for k, v in vars(a).items() if k not in ("out", "hf_out", "overwrite", "fortune_dir")}
    lines = [
        "# seqboat-mamba-bytes: how this model was trained", "",
        "Byte-level Mamba-1 trained by `weights/training/train.py` on the plain-text files of Debian's",
        "`fortunes` package (`/usr/share/games/fortunes`), fortunes joined by EOS (id 256).",
        "", "## Command", "", "```", "python -m weights.training.train " + " ".join(shlex.quote(x) for x in argv),
        "```", "", "## Result", "",
        "| figure | value |", "|---|---|",
        f"| held-out bits/byte (model) | **{stats['bpb']:.3f}** |",
        f"| held-out bits/byte (byte unigram, fitted on train) | {stats['unigram']:.3f} |",
        f"| final train loss (EMA) | {stats['final_train_bits']:.3f} bits/byte |",
        f"| parameters | {stats['n_params']} |",
        f"| model.safetensors | {size} bytes (fp32) |",
        f"| optimizer steps | {stats['steps']} |",
        f"| training tokens seen | {stats['tokens']} (train stream {stats['train_tokens']} tokens) |",
        f"| training wall time | {stats['train_time']:.0f} s |",
        f"| total wall time (data, training, eval, conversion, samples) | {wall:.0f} s |",
        f"| converted model vs trained module, max abs logit diff (f64) | {diff:.2e} |",
        "", "Held-out set: the fortunes whose CRC-32 mod 100 < 5 "
        f"({stats['n_held']} of {stats['n_held'] + stats['n_train']} fortunes). Each is scored from a fresh",
        "state as `EOS text` predicting `text EOS`; bits/byte is the mean over all "
        f"{stats['n_targets']} targets",
        "(the closing EOS counts as one symbol). The unigram baseline is the add-one-smoothed",
        "frequency of the 257 symbols in the train stream, scored on the same targets.",
        "", "## Hyper-parameters", "", "```", json.dumps(hp, indent=2), "```", "",
        "Architecture: tied embeddings, RMSNorm (eps 1e-5), d_inner = expand x d_model,",
        "dt_rank = ceil(d_model/16), d_conv 4, no projection biases, conv bias. Mamba's own",
        "initialisation (A_log = log 1..N, D = 1, dt bias = softplus^-1 of log-uniform dt in",
        "[1e-3, 1e-1], out_proj scaled by 1/sqrt(n_layers)). AdamW (0.9, 0.95), weight decay on",
        "projection matrices only, gradient clip 1.0, linear warm-up then cosine decay to",
        "min-lr-frac x lr over the wall-clock budget. Random windows of seq-len+1 tokens.",
        "",
        "Threads: one. On this shared 2-core machine, with C++ builds running beside it, two",
        "torch threads measured 2-10x slower per step than one (each step waits for the core the",
        "build is using), so `--threads 1` is the default.",
        "", "## Samples (temperature 0.8, after EOS + prompt)", "",
    ] + train_eval.samples_md(samp)
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)   # decays underflow; denormal arithmetic is very slow on x86
    t_start = time.time()
    out = os.path.abspath(a.out)
    if os.path.exists(out) and not a.overwrite:
        print(f"train: {out} exists; pass --overwrite to replace it", file=sys.stderr)
        return 1
    model, stats = train(a)
    save_hf(model, a.hf_out)
    staging = out + ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    convert.convert("hf-mamba", a.hf_out, staging, "f32", byte_tokenizer=True,
                    name="seqboat-mamba-bytes")
    diff = train_eval.logit_diff(model, staging, b"The quick brown fox.\n")
    samp = train_eval.samples(generate, model, 300, a.seed)
    for p, s in samp:
        print(f"--- sample after {p!r}:\n{p}{s}\n", flush=True)
    size = os.path.getsize(os.path.join(staging, "model.safetensors"))
    wall = time.time() - t_start
    with open(os.path.join(staging, "TRAINING.md"), "w") as f:
        f.write(training_md(a, stats, argv, wall, diff, samp, size))
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(staging, out)
    print(f"train: wrote {out} in {wall:.0f} s (held-out {stats['bpb']:.3f} bits/byte, "
          f"unigram {stats['unigram']:.3f}, parity {diff:.1e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Conversion and serving figures for a Mamba checkpoint at the real
state-spaces/mamba-130m-hf shape, random weights: `weights/convert.py
--source hf-mamba` time and output size (f32 and bf16), seqboat_server load
time and memory, and decode tokens/s and inter-token latency at several
batch sizes measured with seqboat_load.

    bazel build //server:seqboat_server //clients/load:seqboat_load
    .venv/bin/python bench/convert_serve_bench.py [--json PATH] [--batches 1,8,32]
        [--d_model 768 --layers 24 --vocab 50280] [--input_len 64 --output_len 128]

The checkpoint is a `transformers.MambaForCausalLM` with random weights
(state 16, expand 2, conv 4, tied embeddings, as the real one) written with
save_pretrained. The real GPT-NeoX tokenizer is not available offline: the
model gets the repository's GPT-NeoX-style byte BPE fixture
(tests/data/tokenizers/byte_bpe.json) when the vocabulary holds its ids, else
the byte tokenizer. Either way the prompts are synthetic token ids drawn by
seqboat_load, so the tokenizer does not change the figures. The figures are
speed, not quality; on a shared machine they are noisy (the load average is
recorded beside them).
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from server_probe import ServerProcess

ROOT = pathlib.Path(__file__).resolve().parents[1]

SERVER_TARGET, LOAD_TARGET = "//server:seqboat_server", "//clients/load:seqboat_load"
BPE_FIXTURE = ROOT / "tests/data/tokenizers/byte_bpe.json"
BYTE_TOKENIZER_MIN_VOCAB = 257          # 256 bytes + EOS (weights/canonical.py)
# Fixed parts of the mamba-130m-hf shape; the flags vary the rest.
STATE_SIZE, EXPAND, CONV_KERNEL = 16, 2, 4
MiB = 1 << 20


def parse_batches(text):
    batches = [int(b) for b in text.split(",") if b.strip()]
    if not batches or min(batches) < 1:
        raise argparse.ArgumentTypeError(f"--batches {text!r}: positive integers, comma-separated")
    return batches


def tokenizer_ids(path):
    with open(path) as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def choose_tokenizer(vocab):
    """(description, convert.py tokenizer flags, file to put beside the checkpoint)."""
    n = tokenizer_ids(BPE_FIXTURE)
    if vocab >= n:
        return (f"{BPE_FIXTURE.relative_to(ROOT)} (GPT-NeoX-style byte BPE, {n} ids)", [],
                BPE_FIXTURE)
    if vocab >= BYTE_TOKENIZER_MIN_VOCAB:
        return ("byte tokenizer (convert.py --byte-tokenizer, 257 ids)", ["--byte-tokenizer"],
                None)
    sys.exit(f"--vocab {vocab} is below the byte tokenizer's {BYTE_TOKENIZER_MIN_VOCAB} ids")


def write_hf_checkpoint(out, d_model, layers, vocab, tokenizer_file, seed):
    """save_pretrained of a random MambaForCausalLM; returns its parameter count."""
    import torch
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(seed)
    cfg = MambaConfig(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=layers,
                      state_size=STATE_SIZE, expand=EXPAND, conv_kernel=CONV_KERNEL,
                      tie_word_embeddings=True, architectures=["MambaForCausalLM"])
    model = MambaForCausalLM(cfg)
    model.save_pretrained(out, safe_serialization=True)
    if tokenizer_file is not None:
        shutil.copyfile(tokenizer_file, os.path.join(out, "tokenizer.json"))
    return sum(p.numel() for p in model.parameters())


def dir_bytes(path):
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def convert(src, out, dtype, tok_flags, name):
    """Wall time of the converter as a user runs it (interpreter start included)."""
    argv = [sys.executable, "-m", "weights.convert", "--source", "hf-mamba", str(src), str(out),
            "--dtype", dtype, "--name", name, *tok_flags]
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"convert ({dtype}) failed:\n{res.stderr}")
    return {"seconds": seconds, "bytes": dir_bytes(out),
            "safetensors_bytes": os.path.getsize(os.path.join(out, "model.safetensors"))}


def run_load(load_bin, target, batch, requests, a, out_json):
    """One closed-loop seqboat_load run at concurrency `batch`; its result JSON."""
    argv = [str(load_bin), f"--target={target}", f"--concurrency={batch}",
            f"--num_requests={requests}", f"--input_len={a.input_len}",
            f"--output_len={a.output_len}", "--range_ratio=0", "--ignore_eos=true",
            "--temperature=0", f"--seed={a.seed}", "--progress=false",
            f"--result_json={out_json}"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=a.timeout)
    if res.returncode != 0:
        sys.exit(f"seqboat_load (batch {batch}) failed:\n{res.stderr}")
    with open(out_json) as f:
        r = json.load(f)
    if r["failed"] or r["completed"] != requests:
        sys.exit(f"seqboat_load (batch {batch}): {r['completed']} of {requests} completed, "
                 f"status {r['status_counts']}")
    return r


def decode_figures(batch, r):
    return {
        "batch": batch, "requests": r["completed"],
        "output_tokens": r["total_output_tokens"], "duration_s": r["duration"],
        # Every output token over the run's wall time, prefill and first tokens included.
        "output_tok_s": r["output_throughput"],
        # Steady decode rate: `batch` tokens per engine step, the step time
        # being the median gap between a stream's messages. The median skips
        # the slower steps that also carried other requests' prefill chunks,
        # which TPOT and output_tok_s include. None when no stream got two
        # messages (the server coalesces tokens a slow reader has not yet
        # taken: tiny models only, where steps take microseconds).
        "decode_tok_s": batch * 1e3 / r["median_itl_ms"] if r["median_itl_ms"] > 0 else None,
        "median_itl_ms": r["median_itl_ms"], "p90_itl_ms": r["p90_itl_ms"],
        "p99_itl_ms": r["p99_itl_ms"], "median_tpot_ms": r["median_tpot_ms"],
        "median_ttft_ms": r["median_ttft_ms"],
    }


def serve_and_measure(a, model_dir, work):
    args = [f"--max_slots={max(32, max(a.batches))}",
            f"--max_new_tokens_limit={max(4096, a.output_len)}",
            f"--max_prompt_tokens={max(32768, a.input_len)}",
            f"--cpu_threads={a.cpu_threads}"]
    server = ServerProcess(a.server_bin, model_dir, args, log_path=os.path.join(work, "server.log"))
    with server:
        serving = server.start(timeout_s=a.timeout)
        listening = server.line_time("listening on ")
        http_up = server.line_time("http listening on ")
        after_load = server.memory()
        runs = []
        for b in a.batches:
            r = run_load(a.load_bin, server.target, b, b * a.rounds, a,
                         os.path.join(work, f"load_b{b}.json"))
            runs.append(decode_figures(b, r))
            print(f"  batch {b}: {runs[-1]['output_tok_s']:.1f} output tok/s", flush=True)
        after = server.memory()
        code = server.stop()
    if code != 0:
        sys.exit(f"server exited with {code} on SIGTERM; log: {server.log_path}")
    return {
        "server": {
            "serve_dtype": a.serve_dtype, "args": args,
            "start_to_serving_s": serving,
            "start_to_listening_line_s": listening,
            # The server prints no load-time line of its own: it prints "http
            # listening" before it loads the model and "listening on" once it
            # accepts calls, so the gap is the engine's load (plus gRPC start).
            "model_load_s": listening - http_up,
            "rss_after_load_bytes": after_load["VmRSS"],
            "hwm_after_load_bytes": after_load["VmHWM"],
            "rss_after_decode_bytes": after["VmRSS"],
            "hwm_after_decode_bytes": after["VmHWM"],
        },
        "decode": runs,
    }


def print_table(res):
    s, m = res["shape"], res["machine"]
    print(f"\nMamba d_model {s['d_model']}, {s['layers']} layers, vocab {s['vocab']}, "
          f"state {s['state_size']}, expand {s['expand']} ({s['params'] / 1e6:.1f}M params, "
          f"random weights)")
    print(f"tokenizer: {res['tokenizer']}; prompts: {res['prompts']}")
    print(f"load average {' '.join(f'{x:.2f}' for x in m['loadavg_before'])} before, "
          f"{' '.join(f'{x:.2f}' for x in m['loadavg_after'])} after ({m['cpus']} CPUs)")
    print(f"\n{'conversion (hf-mamba)':<34}{'time s':>10}{'output MiB':>12}")
    for dtype, c in res["convert"].items():
        print(f"  -> {dtype:<30}{c['seconds']:>10.2f}{c['bytes'] / MiB:>12.1f}")
    v = res["server"]
    print(f"\nserver ({v['serve_dtype']} model)")
    print(f"  {'start -> health SERVING':<40}{v['start_to_serving_s']:>9.2f} s")
    print(f"  {'start -> listening line':<40}{v['start_to_listening_line_s']:>9.2f} s")
    print(f"  {'model load (http up -> listening)':<40}{v['model_load_s']:>9.2f} s")
    print(f"  {'VmRSS after load':<40}{v['rss_after_load_bytes'] / MiB:>9.1f} MiB")
    print(f"  {'VmHWM after decode runs':<40}{v['hwm_after_decode_bytes'] / MiB:>9.1f} MiB")
    print(f"\ndecode (prompt {res['input_len']}, output {res['output_len']} tokens, eos ignored, "
          f"greedy, closed loop)")
    cols = ("batch", "reqs", "out tok/s", "decode tok/s", "ITL p50", "ITL p90", "ITL p99",
            "TPOT p50", "TTFT p50")
    print("".join(f"{c:>13}" for c in cols) + "   (ms)")
    for d in res["decode"]:
        decode = "-" if d["decode_tok_s"] is None else f"{d['decode_tok_s']:.1f}"
        vals = (d["batch"], d["requests"], f"{d['output_tok_s']:.1f}", decode,
                *(f"{d[k]:.2f}" for k in ("median_itl_ms", "p90_itl_ms", "p99_itl_ms",
                                          "median_tpot_ms", "median_ttft_ms")))
        print("".join(f"{x:>13}" for x in vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d_model", type=int, default=768)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--vocab", type=int, default=50280)
    ap.add_argument("--batches", type=parse_batches, default=[1, 8, 32])
    ap.add_argument("--input_len", type=int, default=64, help="prompt tokens")
    ap.add_argument("--output_len", type=int, default=128, help="tokens generated per request")
    ap.add_argument("--rounds", type=int, default=2,
                    help="requests per batch size = batch x rounds")
    ap.add_argument("--serve_dtype", choices=("f32", "bf16"), default="f32",
                    help="which converted model the server loads")
    ap.add_argument("--cpu_threads", type=int, default=0, help="server flag; 0: BLAS default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="/tmp/seqboat_bench/convert_serve_bench.json",
                    help="where to write the figures")
    ap.add_argument("--work_dir", help="keep the checkpoints and logs here (default: a "
                    "temporary directory, removed)")
    ap.add_argument("--server_bin", default=str(ROOT / "bazel-bin/server/seqboat_server"))
    ap.add_argument("--load_bin", default=str(ROOT / "bazel-bin/clients/load/seqboat_load"))
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per server start or "
                    "load run before giving up")
    a = ap.parse_args()
    for path, target in ((a.server_bin, SERVER_TARGET), (a.load_bin, LOAD_TARGET)):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: bazel build {SERVER_TARGET} {LOAD_TARGET}")

    tok_desc, tok_flags, tok_file = choose_tokenizer(a.vocab)
    loadavg_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="convert_serve_bench.") as tmp:
        work = a.work_dir or tmp
        os.makedirs(work, exist_ok=True)
        hf = os.path.join(work, "hf")
        print(f"writing a random MambaForCausalLM to {hf}", flush=True)
        t0 = time.perf_counter()
        params = write_hf_checkpoint(hf, a.d_model, a.layers, a.vocab, tok_file, a.seed)
        build_s = time.perf_counter() - t0
        hf_bytes = dir_bytes(hf)
        conv = {}
        for dtype in ("f32", "bf16"):
            print(f"converting to {dtype}", flush=True)
            conv[dtype] = convert(hf, os.path.join(work, dtype), dtype, tok_flags,
                                  f"mamba-d{a.d_model}-l{a.layers}-random-{dtype}")
        print(f"serving the {a.serve_dtype} model", flush=True)
        served = serve_and_measure(a, os.path.join(work, a.serve_dtype), work)
    res = {
        "shape": {"d_model": a.d_model, "layers": a.layers, "vocab": a.vocab,
                  "state_size": STATE_SIZE, "expand": EXPAND, "conv_kernel": CONV_KERNEL,
                  "tied_embeddings": True, "params": params},
        "tokenizer": tok_desc,
        "prompts": "synthetic token ids drawn by seqboat_load (fixed length)",
        "input_len": a.input_len, "output_len": a.output_len, "rounds": a.rounds,
        "hf_checkpoint": {"build_s": build_s, "bytes": hf_bytes},
        "convert": conv, **served,
        "machine": {"cpus": os.cpu_count(), "loadavg_before": list(loadavg_before),
                    "loadavg_after": list(os.getloadavg())},
        "command": [sys.executable, *sys.argv],
    }
    print_table(res)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=2)
    print(f"\nwrote {a.json}")
    bad = [k for k, v in flat_numbers(res) if not math.isfinite(v)]
    if bad:
        sys.exit(f"non-finite figures: {bad}")


def flat_numbers(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from flat_numbers(v, f"{prefix}{k}.")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from flat_numbers(v, f"{prefix}{i}.")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix.rstrip("."), float(obj)


if __name__ == "__main__":
    main()

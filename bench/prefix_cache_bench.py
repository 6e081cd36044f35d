#!/usr/bin/env python3
"""Prefix-cache benchmark: TTFT of multi-turn chats with the server's prefix
cache off and on.

    bazel build //server:seqboat_server //clients/load:seqboat_load
    .venv/bin/python bench/prefix_cache_bench.py MODEL_DIR [--histories 1024,4096,16384]
        [--concurrencies 1,16] [--turns 4] [--cache_bytes N] [--out_dir DIR]
        [-- EXTRA SERVER FLAGS, e.g. --backend=cuda --cpu_threads=16]

For each cache setting (off: --prefix_cache_bytes=0, on: --prefix_cache_bytes=N)
it starts seqboat_server once on MODEL_DIR (loopback, free ports), warms it up,
then runs `seqboat_load --workload=chat` for every history length and
concurrency: each conversation's turn 0 sends the history, each later turn the
previous prompt, the streamed answer and a new user message, so with the cache
on a turn can resume from the previous turn's state. It prints, per (history,
concurrency), the TTFT of the last turn with the cache off and on and their
ratio, and the cached prompt tokens the server reported; writes one result
JSON per run, a summary JSON and, where matplotlib is importable, a plot of
TTFT per turn per concurrency (clients/load/plot.py).

Every run has its own seed, so no run's conversations share a prefix with an
earlier run's on the same server; the off and on servers get the same seeds,
so they are sent the same histories and user messages (and, with greedy
sampling, the same answers when the cache resumes exactly). Runs with fewer
than --min_conversations conversations in flight run more conversations one
after another, so that a turn's figures are not a single sample.

Figures, not assertions: nothing here checks a speed. The exit status is 1
when a server does not start or a run has failed turns (the table is printed
first). Standard library only, so any python3 runs it; the plot uses the
project venv's interpreter when there is one.
"""
import argparse
import ctypes
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER_TARGET, LOAD_TARGET = "//server:seqboat_server", "//clients/load:seqboat_load"
PR_SET_PDEATHSIG = 1
# A warm-up before the measured runs, so that one-time costs (allocations,
# CUDA graph capture) do not land in the first run's turn 0.
WARMUP = {"history_len": 256, "turns": 2, "output_len": 8, "seed": 999_999}


def parse_ints(text):
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: positive integers, comma-separated")
    return values


def _die_with_parent():
    # A benchmark killed mid-run must not leave a server holding memory.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Server:
    """seqboat_server on 127.0.0.1 with free ports; `target` once it listens."""

    def __init__(self, binary, model_dir, args, log_path):
        self.argv = [str(binary), f"--model_dir={model_dir}", "--host=127.0.0.1", "--port=0",
                     "--http_port=0", *args]
        self.log_path = log_path
        self.proc = None
        self.target = None
        self._listening = threading.Event()

    def start(self, timeout_s):
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=log,
                                         text=True, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        end = time.monotonic() + timeout_s
        while not self._listening.wait(0.1):
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} before "
                                   f"listening:\n{tail(self.log_path)}")
            if time.monotonic() > end:
                raise RuntimeError(f"server not listening after {timeout_s} s")
        return self.target

    def _read_stdout(self):
        # The gRPC port is printed once the model is loaded and calls are
        # accepted; "http listening on" comes earlier and is skipped.
        for line in self.proc.stdout:
            if line.startswith("listening on "):
                self.target = line[len("listening on "):].strip()
                self._listening.set()

    def stop(self, grace_s=60):
        """SIGTERM (the server drains and exits 0); SIGKILL if it does not."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def tail(path, lines=20):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_chat(a, target, out_json, label, history_len, concurrency, seed, turns=None,
             output_len=None, conversations=None):
    """One `seqboat_load --workload=chat` run; its result JSON."""
    argv = [str(a.load_bin), f"--target={target}", "--workload=chat",
            f"--concurrency={concurrency}",
            f"--chat_conversations={conversations or concurrency}",
            f"--chat_turns={turns or a.turns}", f"--chat_history_len={history_len}",
            f"--chat_user_len={a.user_len}", f"--output_len={output_len or a.output_len}",
            "--ignore_eos=true", "--temperature=0", f"--seed={seed}", "--progress=false",
            f"--request_timeout_s={a.timeout}", f"--label={label}",
            f"--chat_lockstep={'true' if a.lockstep else 'false'}",
            f"--result_json={out_json}"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=a.timeout)
    if res.returncode != 0:
        raise RuntimeError(f"seqboat_load failed ({res.returncode}): {res.stderr.strip()}")
    with open(out_json) as f:
        return json.load(f)


def last_turn(result):
    turns = sorted(result["turns"], key=lambda t: t["turn"])
    return turns[-1]


def measure(a, mode, cache_args):
    """Starts a server with `cache_args`, runs every (history, concurrency);
    {(history, concurrency): result JSON}."""
    server = Server(a.server_bin, a.model_dir, [*server_limits(a), *cache_args, *a.server_args],
                    os.path.join(a.out_dir, f"server-cache-{mode}.log"))
    results = {}
    try:
        t0 = time.monotonic()
        target = server.start(a.timeout)
        print(f"cache {mode}: server at {target} ({time.monotonic() - t0:.1f} s to listen), "
              f"flags {' '.join(server.argv[5:])}", flush=True)
        run_chat(a, target, os.path.join(a.out_dir, f"warmup-cache-{mode}.json"), "warmup",
                 WARMUP["history_len"], 1, WARMUP["seed"], turns=WARMUP["turns"],
                 output_len=WARMUP["output_len"])
        for i, (h, c) in enumerate(runs(a)):
            out_json = os.path.join(a.out_dir, f"cache-{mode}-h{h}-c{c}.json")
            t0 = time.monotonic()
            r = run_chat(a, target, out_json, f"cache-{mode}", h, c, a.seed + i,
                         conversations=max(c, a.min_conversations))
            t = last_turn(r)
            print(f"  history {h:>6} concurrency {c:>3}: last-turn TTFT p50 "
                  f"{t['median_ttft_ms']:.1f} ms, cached {t['mean_cached_prompt_tokens']:.0f} "
                  f"of {t['mean_prompt_tokens']:.0f} prompt tokens "
                  f"({time.monotonic() - t0:.1f} s)", flush=True)
            results[(h, c)] = r
    finally:
        code = server.stop()
    if code not in (0, None):
        print(f"cache {mode}: server exited with {code} on SIGTERM; log "
              f"{server.log_path}", file=sys.stderr)
    return results


def runs(a):
    return [(h, c) for h in a.histories for c in a.concurrencies]


def server_limits(a):
    longest = max(a.histories) + (a.turns - 1) * (a.output_len + a.user_len)
    return [f"--max_slots={max(64, max(a.concurrencies))}",
            f"--max_queue={max(256, max(a.concurrencies))}",
            f"--max_prompt_tokens={max(32768, longest)}",
            f"--max_new_tokens_limit={max(4096, a.output_len)}"]


def ratio(off, on):
    return off / on if on > 0 else math.nan


def table(a, off, on):
    cols = ("history", "conc", "prompt", "TTFT p50 off", "TTFT p50 on", "off/on",
            "TTFT p90 off", "TTFT p90 on", "off/on", "cached on", "failed")
    lines = [f"last turn (turn {a.turns - 1}) of {a.turns}; TTFT in ms; prompt and cached in "
             f"tokens (means); failed: turns failed over the run, off + on",
             "".join(f"{c:>13}" for c in cols)]
    rows = []
    for h, c in runs(a):
        f, n = last_turn(off[(h, c)]), last_turn(on[(h, c)])
        failed = off[(h, c)]["failed"] + on[(h, c)]["failed"]
        row = {"history_len": h, "concurrency": c, "prompt_tokens": n["mean_prompt_tokens"],
               "ttft_p50_off_ms": f["median_ttft_ms"], "ttft_p50_on_ms": n["median_ttft_ms"],
               "ttft_p50_ratio": ratio(f["median_ttft_ms"], n["median_ttft_ms"]),
               "ttft_p90_off_ms": f["p90_ttft_ms"], "ttft_p90_on_ms": n["p90_ttft_ms"],
               "ttft_p90_ratio": ratio(f["p90_ttft_ms"], n["p90_ttft_ms"]),
               "cached_on_tokens": n["mean_cached_prompt_tokens"],
               "cached_off_tokens": f["mean_cached_prompt_tokens"],
               "samples_off": f["count_ttft"], "samples_on": n["count_ttft"],
               "failed": failed}
        rows.append(row)
        vals = (h, c, f"{row['prompt_tokens']:.0f}", f"{row['ttft_p50_off_ms']:.2f}",
                f"{row['ttft_p50_on_ms']:.2f}", f"{row['ttft_p50_ratio']:.2f}x",
                f"{row['ttft_p90_off_ms']:.2f}", f"{row['ttft_p90_on_ms']:.2f}",
                f"{row['ttft_p90_ratio']:.2f}x", f"{row['cached_on_tokens']:.0f}", failed)
        lines.append("".join(f"{v:>13}" for v in vals))
    return "\n".join(lines), rows


def plot(a):
    """One PNG per concurrency, cache off and on for every history; skipped
    (with a note) where matplotlib is missing."""
    venv = ROOT / ".venv/bin/python"
    python = str(venv) if venv.exists() else sys.executable
    for c in a.concurrencies:
        paths = [os.path.join(a.out_dir, f"cache-{m}-h{h}-c{c}.json")
                 for h in a.histories for m in ("off", "on")]
        out = os.path.join(a.out_dir, f"ttft_per_turn_c{c}.png")
        res = subprocess.run([python, str(ROOT / "clients/load/plot.py"), "--out", out,
                              "--title", f"seqboat prefix cache: TTFT per turn, "
                              f"concurrency {c}", *paths], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"no plot ({python}): {res.stderr.strip().splitlines()[-1:]}")
            return
        print(f"plot: {out}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Arguments after -- go to both servers, e.g. -- --backend=cuda.")
    ap.add_argument("model_dir", help="a canonical model directory (config.json, ...)")
    ap.add_argument("--histories", type=parse_ints, default=[1024, 4096, 16384],
                    help="turn-0 prompt lengths in tokens")
    ap.add_argument("--concurrencies", type=parse_ints, default=[1, 16],
                    help="conversations in flight")
    ap.add_argument("--min_conversations", type=int, default=4,
                    help="conversations per run at least (run one after another when more "
                    "than the concurrency)")
    ap.add_argument("--turns", type=int, default=4, help="turns per conversation")
    ap.add_argument("--lockstep", action=argparse.BooleanOptionalAction, default=True,
                    help="turn N of every conversation starts together (seqboat_load "
                         "--chat_lockstep), so a turn's TTFT is not mixed with other "
                         "conversations' earlier, longer prefills")
    ap.add_argument("--user_len", type=int, default=64, help="user message tokens per turn")
    ap.add_argument("--output_len", type=int, default=128, help="answer tokens per turn")
    ap.add_argument("--cache_flag", default="prefix_cache_bytes",
                    help="the server flag that sizes the cache; empty: pass none (both "
                    "servers alike, to try the benchmark on a server without a cache)")
    ap.add_argument("--cache_bytes", type=int, default=4 << 30,
                    help="--<cache_flag> of the cache-on server")
    ap.add_argument("--seed", type=int, default=0, help="run i uses seed + i")
    ap.add_argument("--out_dir", default="/tmp/seqboat_bench/prefix_cache")
    ap.add_argument("--server_bin", default=str(ROOT / "bazel-bin/server/seqboat_server"))
    ap.add_argument("--load_bin", default=str(ROOT / "bazel-bin/clients/load/seqboat_load"))
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds per server start or load run before giving up")
    argv = sys.argv[1:]
    server_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1:]
    a = ap.parse_args(argv)
    a.server_args = server_args
    if a.turns < 1 or a.min_conversations < 1 or a.output_len < 1 or a.user_len < 0:
        ap.error("--turns, --min_conversations and --output_len must be >= 1, "
                 "--user_len >= 0")
    for path, target in ((a.server_bin, SERVER_TARGET), (a.load_bin, LOAD_TARGET)):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: bazel build {SERVER_TARGET} {LOAD_TARGET}")
    if not os.path.isfile(os.path.join(a.model_dir, "config.json")):
        sys.exit(f"no config.json in {a.model_dir}")
    os.makedirs(a.out_dir, exist_ok=True)

    flag = f"--{a.cache_flag}=" if a.cache_flag else None
    modes = {"off": [f"{flag}0"] if flag else [],
             "on": [f"{flag}{a.cache_bytes}"] if flag else []}
    loadavg_before = os.getloadavg()
    try:
        measured = {mode: measure(a, mode, args) for mode, args in modes.items()}
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit(f"prefix_cache_bench: {e}")
    text, rows = table(a, measured["off"], measured["on"])
    print()
    print(text)
    summary = {
        "model_dir": str(a.model_dir), "turns": a.turns, "user_len": a.user_len,
        "output_len": a.output_len, "min_conversations": a.min_conversations,
        "server_flags": {m: [*server_limits(a), *args, *a.server_args]
                         for m, args in modes.items()},
        "last_turn": rows,
        "machine": {"cpus": os.cpu_count(), "loadavg_before": list(loadavg_before),
                    "loadavg_after": list(os.getloadavg())},
        "command": [sys.executable, *sys.argv],
    }
    path = os.path.join(a.out_dir, "summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"\nresults in {a.out_dir} (summary.json, one result JSON per run, server logs)")
    plot(a)
    if any(r["failed"] for r in rows):
        sys.exit("prefix_cache_bench: some turns failed (see the failed column)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Soak and storm figures for one seqboat_server: RSS after a burst, slots
after a cancel storm, RSS along one long stream.

    bazel build //server:seqboat_server
    .venv/bin/python bench/soak_storm.py [MODEL_DIR] [--storm 10000] \
        [--stream_tokens 100000] [--burst 256]

Starts the server on MODEL_DIR (default: the bundled model) on free loopback
ports and, in order:
  1. burst: --burst Generate calls (long text prompts) and Tokenize calls of
     the largest accepted input, 32 at a time; RSS before, at the peak and
     after the server has been idle for a few seconds (it trims freed heap
     when idle);
  2. cancel storm: --storm Generate calls, each cancelled by the client after
     0-50 ms, 200 in flight; then the server must be idle with every state
     slot free (from /metrics), and answer a normal request;
  3. one stream of --stream_tokens tokens, RSS sampled along it.
Prints the figures; exits 1 if a slot leaked or the server stopped answering.
Figures, not assertions on speed. The gRPC messages are generated from
proto/seqboat/v1/generate.proto with protoc at run time (no stubs needed).
"""
import argparse
import concurrent.futures
import importlib
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from prefix_cache_bench import Server  # noqa: E402  (same directory)

METHOD = "/seqboat.v1.TextGeneration/"


class SideportServer(Server):
    """Also keeps the HTTP side port (for /metrics)."""

    http = None

    def _read_stdout(self):
        for line in self.proc.stdout:
            if line.startswith("http listening on "):
                self.http = line[len("http listening on "):].strip()
            elif line.startswith("listening on "):
                self.target = line[len("listening on "):].strip()
                self._listening.set()


def load_messages(tmp):
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}", f"--python_out={tmp}",
                    "seqboat/v1/generate.proto"], check=True)
    sys.path.insert(0, tmp)
    return importlib.import_module("seqboat.v1.generate_pb2")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def metric(http, name):
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", nargs="?", default=str(ROOT / "weights/models/default"))
    ap.add_argument("--burst", type=int, default=256)
    ap.add_argument("--storm", type=int, default=10000)
    ap.add_argument("--stream_tokens", type=int, default=100000)
    ap.add_argument("--server_bin", default=str(ROOT / "bazel-bin/server/seqboat_server"))
    ap.add_argument("--out_dir", default="/tmp/seqboat_bench/soak")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    pb = load_messages(tmp)
    slots = 64
    server = SideportServer(a.server_bin, a.model_dir,
                    [f"--max_slots={slots}", "--max_queue=1024",
                     f"--max_new_tokens_limit={max(a.stream_tokens, 4096)}",
                     "--log_level=warn"],
                    os.path.join(a.out_dir, "server.log"))
    server.start(120)
    pid = server.proc.pid
    channel = grpc.insecure_channel(server.target, options=[
        ("grpc.max_receive_message_length", 64 << 20)])
    generate = channel.unary_stream(METHOD + "Generate",
                                    request_serializer=pb.GenerateRequest.SerializeToString,
                                    response_deserializer=pb.GenerateResponse.FromString)
    tokenize = channel.unary_unary(METHOD + "Tokenize",
                                   request_serializer=pb.TokenizeRequest.SerializeToString,
                                   response_deserializer=pb.TokenizeResponse.FromString)
    info = channel.unary_unary(METHOD + "GetModelInfo",
                               request_serializer=pb.GetModelInfoRequest.SerializeToString,
                               response_deserializer=pb.ModelInfo.FromString)
    model = info(pb.GetModelInfoRequest(), timeout=30)
    failed = False

    def run(req, timeout=600):
        n = 0
        for msg in generate(req, timeout=timeout):
            n += len(msg.token_ids)
        return n

    baseline = rss_mib(pid)
    # 1. burst
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "sea", "boat", "wave", "state"]
    def one_burst(i):
        if i % 4 == 0:
            # As long as the token limit allows (the byte limit is 16x it).
            text = " ".join(rng.choice(words) for _ in range(model.max_prompt_tokens // 8))
            tokenize(pb.TokenizeRequest(text=text), timeout=120)
            return 0
        text = " ".join(rng.choice(words) for _ in range(2000))
        req = pb.GenerateRequest(text=text)
        req.stopping.max_new_tokens = 8
        return run(req)

    peak = baseline
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        futs = [pool.submit(one_burst, i) for i in range(a.burst)]
        while not all(f.done() for f in futs):
            peak = max(peak, rss_mib(pid))
            time.sleep(0.05)
        for f in futs:
            f.result()
    burst_s = time.time() - t0
    peak = max(peak, rss_mib(pid))
    time.sleep(4)  # the server trims once it has been idle a poll or two
    after = rss_mib(pid)
    cache = metric(server.http, "seqboat_prefix_cache_bytes") / (1 << 20)
    print(f"burst: {a.burst} calls in {burst_s:.1f} s; RSS baseline {baseline:.0f} MiB, "
          f"peak {peak:.0f} MiB, after 4 s idle {after:.0f} MiB, of which the prefix "
          f"cache's snapshots hold {cache:.0f} MiB (seqboat_prefix_cache_bytes)", flush=True)

    # 2. cancel storm
    t0 = time.time()
    cancelled = 0

    def storm(i):
        req = pb.GenerateRequest(text=" ".join(words[: 1 + i % 8]))
        req.stopping.max_new_tokens = 4096
        req.stopping.ignore_eos = True
        call = generate(req, timeout=60)
        time.sleep(random.random() * 0.05)
        call.cancel()
        try:
            for _ in call:
                pass
        except grpc.RpcError as e:
            return e.code() == grpc.StatusCode.CANCELLED
        return False

    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        for ok in pool.map(storm, range(a.storm)):
            cancelled += ok
    storm_s = time.time() - t0
    # Every slot must come back, and the queue empty.
    deadline = time.time() + 30
    while time.time() < deadline:
        free = metric(server.http, "seqboat_state_slots_free")
        busy = (metric(server.http, "seqboat_num_requests_running")
                + metric(server.http, "seqboat_num_requests_waiting"))
        if free == slots and busy == 0:
            break
        time.sleep(0.2)
    leaked = slots - free
    req = pb.GenerateRequest(text="after the storm")
    req.stopping.max_new_tokens = 4
    answered = run(req, timeout=60)
    print(f"storm: {a.storm} calls cancelled by the client in {storm_s:.1f} s "
          f"({cancelled} saw CANCELLED); then {leaked:.0f} slots leaked, "
          f"{busy:.0f} requests running or waiting; a request after it got "
          f"{answered} tokens; RSS {rss_mib(pid):.0f} MiB", flush=True)
    if answered != 4 or leaked != 0 or busy != 0:
        failed = True

    # 3. long stream
    req = pb.GenerateRequest(text="once upon a time")
    req.stopping.max_new_tokens = a.stream_tokens
    req.stopping.ignore_eos = True
    samples = []
    t0 = time.time()
    n = 0
    next_sample = 0
    for msg in generate(req, timeout=3600):
        n += len(msg.token_ids)
        if n >= next_sample:
            samples.append((n, rss_mib(pid)))
            next_sample += max(1, a.stream_tokens // 10)
    samples.append((n, rss_mib(pid)))
    print(f"stream: {n} tokens in {time.time() - t0:.1f} s; RSS along it (tokens: MiB): "
          + ", ".join(f"{k}: {v:.0f}" for k, v in samples), flush=True)
    server.stop()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""bench/convert_serve_bench.py end to end at a tiny shape: it converts,
serves and load-tests, and its JSON holds every figure, positive and finite.
Speeds are never asserted: the machines are shared and noisy."""

import json
import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench/convert_serve_bench.py"
BATCHES = (1, 2)
# Enough tokens that each stream gets more than one message even when the
# server coalesces tokens of this microsecond-per-step model, so that ITL and
# TPOT have samples.
OUTPUT_LEN = 32


def positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def test_tiny_shape_reports_every_figure(tmp_path, seqboat_server, seqboat_load):
    out = tmp_path / "figures.json"
    run = subprocess.run(
        [sys.executable, str(BENCH), "--d_model", "64", "--layers", "2", "--vocab", "512",
         "--batches", ",".join(map(str, BATCHES)), "--input_len", "6",
         "--output_len", str(OUTPUT_LEN), "--rounds", "1", "--json", str(out),
         "--work_dir", str(tmp_path / "work"),
         "--server_bin", str(seqboat_server), "--load_bin", str(seqboat_load),
         "--timeout", "300"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "decode tok/s" in run.stdout and "VmRSS after load" in run.stdout
    r = json.loads(out.read_text())

    assert r["shape"]["d_model"] == 64 and r["shape"]["vocab"] == 512
    assert positive(r["shape"]["params"])
    assert "byte tokenizer" in r["tokenizer"]
    assert positive(r["hf_checkpoint"]["build_s"]) and positive(r["hf_checkpoint"]["bytes"])
    assert sorted(r["convert"]) == ["bf16", "f32"]
    for c in r["convert"].values():
        for key in ("seconds", "bytes", "safetensors_bytes"):
            assert positive(c[key]), (key, c)
    # bf16 matrices: the file is smaller, whatever the timing.
    assert r["convert"]["bf16"]["bytes"] < r["convert"]["f32"]["bytes"]

    s = r["server"]
    for key in ("start_to_serving_s", "start_to_listening_line_s", "model_load_s",
                "rss_after_load_bytes", "hwm_after_load_bytes", "rss_after_decode_bytes",
                "hwm_after_decode_bytes"):
        assert positive(s[key]), (key, s)
    assert s["hwm_after_decode_bytes"] >= s["rss_after_load_bytes"]
    assert "--max_slots=32" in s["args"]

    assert [d["batch"] for d in r["decode"]] == list(BATCHES)
    for d in r["decode"]:
        assert d["requests"] == d["batch"] and d["output_tokens"] == OUTPUT_LEN * d["batch"]
        for key in ("duration_s", "output_tok_s", "median_ttft_ms"):
            assert positive(d[key]), (key, d)
        # The tiny model's steps take microseconds: a stream's tokens may all
        # arrive in one message (the server joins what a reader has not yet
        # taken), leaving no gap to measure; the bench then reports no decode
        # rate rather than an infinite one.
        if d["median_itl_ms"] == 0:
            assert d["decode_tok_s"] is None and d["median_tpot_ms"] >= 0, d
        else:
            for key in ("decode_tok_s", "median_itl_ms", "p90_itl_ms", "p99_itl_ms",
                        "median_tpot_ms"):
                assert positive(d[key]), (key, d)

    m = r["machine"]
    assert positive(m["cpus"])
    assert all(math.isfinite(x) and x >= 0 for x in m["loadavg_before"] + m["loadavg_after"])

#!/usr/bin/env bash
# Throughput-vs-latency sweep: starts seqboat_server on a model (loopback, a
# free port), runs seqboat_load closed-loop at each concurrency with a bounded
# request count, writes one result JSON per point and a PNG of the curve.
#
#   deploy/bench_sweep.sh [MODEL_DIR] [OUT_DIR]
#   env: CONCURRENCIES="1 2 4 8 16 32 64"  REQUESTS_PER_LEVEL=4  (x concurrency,
#        at least MIN_REQUESTS=16)  INPUT_LEN=64  OUTPUT_LEN=128  SEED=0
#        SERVER_ARGS="--cpu_threads=2"  LABEL=name-of-the-curve
#        SERVER_BIN, LOAD_BIN, PYTHON: prebuilt binaries and an interpreter
#        with matplotlib (the GPU bundle's; then nothing is built)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
model="${1:-$root/tests/data/tiny_mamba}"
out="${2:-/tmp/seqboat_bench/$(basename "$model")}"
concurrencies="${CONCURRENCIES:-1 2 4 8 16 32 64}"
per_level="${REQUESTS_PER_LEVEL:-4}"
min_requests="${MIN_REQUESTS:-16}"
input_len="${INPUT_LEN:-64}"
output_len="${OUTPUT_LEN:-128}"
seed="${SEED:-0}"
label="${LABEL:-$(basename "$model") in=$input_len out=$output_len}"

server_bin="${SERVER_BIN:-$root/bazel-bin/server/seqboat_server}"
load_bin="${LOAD_BIN:-$root/bazel-bin/clients/load/seqboat_load}"
python="${PYTHON:-$root/.venv/bin/python}"
[[ -n "${SERVER_BIN:-}" ]] || bazel build //server:seqboat_server //clients/load:seqboat_load
mkdir -p "$out"
server_log="$out/server.log"
# shellcheck disable=SC2086
"$server_bin" --model_dir="$model" --host=127.0.0.1 \
  --port=0 --http_port=0 --max_slots=64 --max_new_tokens_limit=100000 \
  ${SERVER_ARGS:-} >"$out/server.stdout" 2>"$server_log" &
server_pid=$!
trap 'kill -TERM $server_pid 2>/dev/null; wait $server_pid 2>/dev/null || true' EXIT
target=""
for _ in $(seq 1 600); do  # up to 60 s for the model to load
  target="$(sed -n 's/^listening on //p' "$out/server.stdout")"
  [[ -n "$target" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$server_log" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$target" ]] || { echo "bench_sweep: server did not start" >&2; exit 1; }
metrics="$(sed -n 's/^http listening on //p' "$out/server.stdout")"
echo "bench_sweep: server at $target (metrics http://$metrics/metrics)"

results=()
for c in $concurrencies; do
  n=$((c * per_level)); ((n < min_requests)) && n=$min_requests
  echo "== concurrency $c, $n requests"
  "$load_bin" --target="$target" \
    --concurrency="$c" --num_requests="$n" --input_len="$input_len" \
    --output_len="$output_len" --seed="$seed" --progress=false \
    --result_json="$out/c$c.json" | grep -E "throughput|Median|P99|Failed"
  # The plot groups points by this label.
  "$python" - "$out/c$c.json" "$label" <<'PY'
import json, sys
path, label = sys.argv[1], sys.argv[2]
r = json.load(open(path)); r["config"]["label"] = label
json.dump(r, open(path, "w"), indent=2)
PY
  results+=("$out/c$c.json")
done
"$python" clients/load/plot.py --out "$out/sweep.png" \
  --title "seqboat sweep: $label" "${results[@]}"
echo "bench_sweep: results and plot in $out"
"$python" - "${results[@]}" <<'PY'
import json, sys
print(f"{'conc':>5} {'req/s':>8} {'out tok/s':>10} {'TTFT p50':>9} {'TTFT p99':>9} "
      f"{'TPOT p50':>9} {'TPOT p99':>9} {'ITL p50':>8} {'ITL p99':>8} {'fail':>5}")
for p in sys.argv[1:]:
    r = json.load(open(p))
    print(f"{r['config']['concurrency']:>5} {r['request_throughput']:>8.2f} "
          f"{r['output_throughput']:>10.1f} {r['median_ttft_ms']:>9.2f} {r['p99_ttft_ms']:>9.2f} "
          f"{r['median_tpot_ms']:>9.3f} {r['p99_tpot_ms']:>9.3f} {r['median_itl_ms']:>8.3f} "
          f"{r['p99_itl_ms']:>8.3f} {r['failed']:>5}")
PY

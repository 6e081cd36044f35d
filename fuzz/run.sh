#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer, ASan and UBSan (--config=fuzz, in an
# output base of their own) and runs each one for a fixed time, starting from
# its committed seeds in fuzz/corpus/<target>/.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# SECONDS per target (default 20, the CI run); TARGETs default to all of them.
# A long campaign is the same command with more seconds: fuzz/run.sh 3600.
# Targets run side by side, FUZZ_JOBS at a time (default: the core count).
# The corpus each target grows is kept in $FUZZ_WORK/corpus/<target>
# (default /tmp/seqboat-fuzz-<checkout>), so a later run continues from it.
# An input that crashes, leaks, breaks an invariant or runs past 10 s lands
# in $FUZZ_WORK/artifacts/<target>/; fix the code and add the input to
# fuzz/corpus/<target>/, where //fuzz:<target>_corpus_test replays it.
# FUZZ_OUTPUT_BASE: the Bazel output base (default: .bazel-fuzz-<checkout>
# beside the checkout). Both defaults are per checkout, so that checkouts
# side by side can fuzz at the same time. Exit status 0 when no target found
# anything.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

seconds="${1:-20}"
shift || true
all=(safetensors model_config tokenizer_json tokenizer_encode detokenizer
     generate_request openai_request chat_template grammar snapshot)
targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
checkout="$(basename "$root")"
work="${FUZZ_WORK:-/tmp/seqboat-fuzz-$checkout}"
output_base="${FUZZ_OUTPUT_BASE:-$(dirname "$root")/.bazel-fuzz-$checkout}"
jobs="${FUZZ_JOBS:-$(nproc)}"

echo "== fuzz: building ${targets[*]} (--config=fuzz, output base $output_base)"
start=$SECONDS
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:${t}_fuzzer"); done
bazel --output_base="$output_base" build --config=fuzz "${labels[@]}"
bin="$(bazel --output_base="$output_base" info --config=fuzz bazel-bin)/fuzz"
echo "== fuzz: built in $((SECONDS - start)) s; ${seconds} s per target, $jobs at a time"

run_one() {
  local t="$1" dict=()
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t" "$work/logs"
  [[ -f "fuzz/$t.dict" ]] && dict=("-dict=fuzz/$t.dict")
  # New inputs go to the first folder; the committed seeds are read only.
  "$bin/${t}_fuzzer" "$work/corpus/$t" "fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$t/" \
    >"$work/logs/$t.log" 2>&1
}

declare -A pids
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "$t" &
  pids[$t]=$!
done

failed=0
total=0
printf '%-18s %12s %10s %8s  %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  status=0
  wait "${pids[$t]}" || status=$?
  log="$work/logs/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$work/corpus/$t" -type f | wc -l)
  total=$((total + ${execs:-0}))
  if ((status == 0)); then
    result=ok
  else
    result="FAILED (exit $status): $log"
    failed=1
  fi
  printf '%-18s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "$corpus" "$result"
done
echo "== fuzz: $total executions in all"
if ((failed)); then
  for t in "${targets[@]}"; do
    grep -hE -A3 'ERROR: |FUZZ_CHECK|SUMMARY: |Test unit written' \
      "$work/logs/$t.log" | head -40 || true
  done
  exit 1
fi

#!/usr/bin/env bash
# Packs the GPU tests and the GPU benchmark, with every shared library they
# load (glibc and its loader included), into .gpu_bundle/ so that a machine
# with a GPU but without this project's toolchain can run them all:
#
#   bash kernels/gpu_bundle.sh                 # here: build and pack
#   bash .gpu_bundle/run.sh OUT_DIR            # there, from the repo root
#   bash .gpu_bundle/extra.sh OUT_DIR [racecheck] [profile] [sweep]
#
# run.sh is the acceptance run (tests, benchmark, memcheck). extra.sh adds
# what a change needs on top: racecheck on the shared-memory kernels, a
# per-kernel profile of the decode steps (ncu), and the server's throughput
# and latency under the load client on the CUDA and CPU backends.
#
# The CUDA runtime the binaries were linked against (libcudart.so.13, a few
# hundred KiB) is packed; the driver is the GPU machine's, and so is cuBLAS:
# libcublas + libcublasLt are ~390 MB even xz-compressed, far beyond what
# can be carried. run.sh finds a libcublas.so.13 there (CUDA install or the
# nvidia-cublas wheel) and says so in summary.txt when it cannot. Results go
# to OUT_DIR as at most four files (summary, test logs, memcheck, benchmark).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

targets=()
for f in kernels/cuda/*_gpu_test.cc tests/gpu/*_gpu_test.cc; do
  pkg="$(dirname "$f")"; name="$(basename "$f" .cc)"
  targets+=("//$pkg:$name")
done
targets+=(//bench:cuda_decode_bench //bench:host_path_bench //server:seqboat_server
          //clients/load:seqboat_load)
# Linked against the kernel libraries rather than each carrying them: the
# kernels are mostly device code that does not compress, and a static server
# and benchmark would carry it twice more than the tests do.
bazel build --dynamic_mode=fully "${targets[@]}"

# bin/ and lib/ are staged here, then travel as one xz archive (the machine
# that runs them limits how much can be carried).
out=.gpu_bundle
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out" "$stage/bin" "$stage/lib"
built=()
for t in "${targets[@]}"; do
  pkg="${t%%:*}"; pkg="${pkg#//}"; name="${t##*:}"
  built+=("bazel-bin/$pkg/$name")
  cp -L "bazel-bin/$pkg/$name" "$stage/bin/"
done
# Every library the binaries resolve here (from where Bazel put them: their
# rpaths are relative), the CUDA runtime included, except the driver's
# (libcuda must match the machine's kernel module) and cuBLAS (too large).
for b in "${built[@]}"; do ldd "$b"; done |
  awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libcuda\.so|libcublas\.so|libcublasLt\.so|libnvidia)[^/]*$' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
[[ -f "$stage/lib/libcudart.so.13" ]] || {
  echo "libcudart.so.13 was not packed" >&2
  exit 1
}
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib/"
tar -C "$stage" -cJf "$out/payload.tar.xz" bin lib
# A run carries at most 64 MiB: the working tree (tracked and untracked,
# not ignored) and the bundle together. One that would not arrive is refused
# here rather than on the GPU machine's clock.
tree=$({ git ls-files -z; git ls-files -z -o --exclude-standard; } |
  { du -cb --files0-from=- 2>/dev/null || true; } | tail -1 | cut -f1)
bundle=$(du -cb "$out" | tail -1 | cut -f1)
echo "bundle $((bundle >> 20)) MiB + working tree $((tree >> 20)) MiB" \
  "of the 64 MiB a run carries"
if ((tree + bundle > 62 * 1024 * 1024)); then
  echo "too large to carry: leave something out of the bundle" >&2
  exit 1
fi

cat > "$out/env.sh" <<'ENV'
# Sourced by run.sh and extra.sh: unpacks the binaries once per machine and
# sets `loader` and `libs` (and `run CMD...`) so that they load the packed
# glibc and CUDA runtime, the machine's driver, and a cuBLAS found there.
bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
here=/tmp/seqboat_gpu_bundle
if [[ ! -f "$here/.unpacked" || "$bundle/payload.tar.xz" -nt "$here/.unpacked" ]]; then
  rm -rf "$here"
  mkdir -p "$here"
  tar -C "$here" -xJf "$bundle/payload.tar.xz"
  touch "$here/.unpacked"
fi

# The driver's folder, then the CUDA install, then the pip wheels (torch's
# nvidia-* packages: nvidia/cu13/lib, nvidia/<name>/lib) for cuBLAS. The
# packed lib/ comes first: its glibc and CUDA runtime are the build's.
cuda_libs=""
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64 \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c '
import os, nvidia
for p in nvidia.__path__:
    for d in sorted(os.listdir(p)):
        print(os.path.join(p, d, "lib"))' 2>/dev/null); do
  [[ -d "$d" ]] && cuda_libs="$cuda_libs:$d"
done
libs="$here/lib$cuda_libs"
loader="$here/lib/ld-linux-x86-64.so.2"
run() { "$loader" --library-path "$libs" "$@"; }
# A wrapper per binary, for scripts that take a program path.
for b in "$here"/bin/*; do
  [[ -x "$b" && "$b" != *.sh ]] || continue
  printf '#!/usr/bin/env bash\nexec "%s" --library-path "%s" "%s" "$@"\n' \
    "$loader" "$libs" "$b" > "$here/$(basename "$b").sh"
  chmod +x "$here/$(basename "$b").sh"
done
sanitizer="$(command -v compute-sanitizer ||
  ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
profiler="$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null ||
  ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1 || true)"
ENV

cat > "$out/extra.sh" <<'EXTRA'
#!/usr/bin/env bash
# The checks beyond run.sh, each a phase named on the command line:
#   racecheck  compute-sanitizer's shared-memory race check on the SeqBoat
#              GAU and the split-key attention tests, the folded-norm GEMV,
#              the Mamba-1 decode scan with dt_proj folded in and the
#              device-grouped MoE ops
#   profile    ncu over the decode steps (130M Mamba at batch 1 and 256, the
#              hybrid at batch 1, Mamba 1.4B at batch 1 when SIZES has 1b;
#              graphs off so that every kernel is listed): each kernel
#              family's time, bytes and achieved bandwidth
#              (bench/ncu_families.py)
#   share      the server at concurrency 256 (in 64 / out 128, 1536 requests)
#              with the prefix cache on and off, next to cuda_decode_bench at
#              batch 256, for the 130M Mamba, Mamba-2 and hybrid shapes: the
#              server's share of its engine
#   sizes      cuda_decode_bench at batch 1, 16, 64, 256 on every model of
#              SIZES (default "130m,1b": the 130M shapes, Mamba 1.4B and 2.8B,
#              Mamba-2 2.7B and a ~1B hybrid; the large ones take ~30-60 s
#              each to write), then at batch 1 and 16 with the GEMVs' early
#              launches off
#   sweep      deploy/bench_sweep.sh on the 130M Mamba shape: the server on
#              the CUDA backend (concurrency 1-256), then on the CPU backend
# Usage: [SIZES=130m,1b] bash .gpu_bundle/extra.sh OUT_DIR PHASE...
# OUT_DIR gets extra.txt (the figures), extra.log (full logs), sweep.png.
set -uo pipefail
bundle="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: extra.sh OUT_DIR PHASE...}"
shift
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$bundle/.."
source "$bundle/env.sh"
report="$out/extra.txt"
full="$out/extra.log"
say() { echo "$*" | tee -a "$report"; }
models=/tmp/seqboat_models
# Writes the models of $1 (sizes, comma-separated) not written yet.
write_models() {
  python3 bench/gpu_decode_bench.py --write_models "$models" --sizes "${1:-130m}" \
    >> "$full" 2>&1
}
# The server's tok/s in each result JSON ($2...) next to the engine's at the
# same batch in cuda_decode_bench's output ($1), and the share.
share_table() {
  python3 - "$@" <<'PY' | tee -a "$report"
import json, re, sys
engine = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\d+)\s+([\d.]+)\s", line)
    if m:
        engine[int(m.group(1))] = float(m.group(2))
print(f"{'conc':>5} {'server tok/s':>13} {'engine tok/s':>13} {'share':>7}")
runs = [json.load(open(p)) for p in sys.argv[2:]]
for r in sorted(runs, key=lambda r: r["config"]["concurrency"]):
    c, s = r["config"]["concurrency"], r["output_throughput"]
    e = engine.get(c, float("nan"))
    print(f"{c:>5} {s:>13.1f} {e:>13.1f} {100 * s / e:>6.1f}%")
PY
}
status=0
for phase in "$@"; do
  case "$phase" in
    racecheck)
      [[ -n "$sanitizer" ]] || { say "racecheck: no compute-sanitizer"; status=1; continue; }
      # test:filter; the folded-norm GEMV's and the dt_proj fold's recorded
      # cases, since their full sweeps are hundreds of launches at 1.4B shapes.
      for tf in 'seqboat_ops_gpu_test:-*LargeWindow*:*DecodeForm/*' 'attention_ops_gpu_test:-*LargeWindow*' \
                'gemv_fusion_gpu_test:*FoldedGemvReplaysToTheEagerBits*' \
                'mamba_ops_gpu_test:*FoldedDtProjReplaysToTheEagerBits*' \
                'moe_ops_gpu_test:*'; do
        t="${tf%%:*}"
        timeout -k 5 240 "$sanitizer" --tool racecheck --racecheck-report all \
          --error-exitcode 9 --print-limit 20 "$loader" --library-path "$libs" \
          "$here/bin/$t" --gtest_filter="${tf#*:}" > /tmp/race.log 2>&1
        rc=$?
        say "racecheck $t: exit $rc"
        grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" /tmp/race.log | tail -4 | tee -a "$report"
        { echo "===== racecheck $t (exit $rc)"; head -c 1048576 /tmp/race.log; } >> "$full"
        ((rc == 0)) || status=1
      done
      ;;
    profile)
      [[ -n "$profiler" ]] || { say "profile: no ncu"; status=1; continue; }
      write_models "${SIZES:-130m}"
      cfgs=("mamba-130m 1" "mamba-130m 256" "hybrid 1")
      [[ ",${SIZES:-130m}," == *,1b,* ]] && cfgs+=("mamba-1.4b 1")
      for cfg in "${cfgs[@]}"; do
        set -- $cfg
        timeout -k 5 200 "$profiler" --clock-control none --profile-from-start off \
          --csv --page raw --print-units base \
          --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
          "$loader" --library-path "$libs" "$here/bin/cuda_decode_bench" \
          --model_dir="$models/$1" --label="$1" --batches="$2" --steps=3 \
          --graphs=false > /tmp/prof.log 2>&1
        rc=$?
        say "== profile $1 batch $2 (exit $rc); every launch in extra.log"
        { echo "===== profile $1 batch $2 (exit $rc)"; head -c 2097152 /tmp/prof.log; } >> "$full"
        grep -E "copy bandwidth|^ +[0-9]+ +[0-9.]+" /tmp/prof.log | tee -a "$report"
        python3 bench/ncu_families.py /tmp/prof.log 2>&1 | tee -a "$report"
      done
      ;;
    share)
      write_models 130m
      for model in mamba-130m mamba2-130m hybrid; do
        run "$here/bin/cuda_decode_bench" --model_dir="$models/$model" \
          --label="$model" --batches=256 --steps=20 > /tmp/engine.log 2>&1
        for cache in on off; do
          args="--backend=cuda --max_slots=256 --max_queue=4096"
          [[ $cache == off ]] && args="$args --prefix_cache_bytes=0"
          SERVER_BIN="$here/seqboat_server.sh" LOAD_BIN="$here/seqboat_load.sh" \
            PYTHON=python3 CONCURRENCIES=256 REQUESTS_PER_LEVEL=6 \
            SERVER_ARGS="$args" LABEL="$model-$cache" timeout -k 5 120 \
            bash deploy/bench_sweep.sh "$models/$model" "/tmp/share_${model}_$cache" \
            > /tmp/sweep.log 2>&1
          rc=$?
          say "== $model, prefix cache $cache (exit $rc);" \
            "$(grep -E 'Median TPOT' /tmp/sweep.log | tr -s ' ')"
          share_table /tmp/engine.log "/tmp/share_${model}_$cache/c256.json"
          { echo "===== share $model cache $cache (exit $rc)"; cat /tmp/sweep.log; } >> "$full"
          ((rc == 0)) || status=1
        done
      done
      ;;
    sizes)
      while read -r label path; do
        say "== $label"
        run "$here/bin/cuda_decode_bench" --model_dir="$path" --label="$label" \
          --batches=1,16,64,256 --steps=20 > /tmp/sizes.log 2>&1
        say "exit $?"
        tee -a "$report" < /tmp/sizes.log
        # The GEMVs' early launches off, at the batches they serve.
        run "$here/bin/cuda_decode_bench" --model_dir="$path" --label="$label" \
          --batches=1,16 --steps=20 --early_launch=false --mixed_chunk=0 \
          > /tmp/sizes.log 2>&1
        say "exit $? (early launches off)"
        tee -a "$report" < /tmp/sizes.log
      done < <(python3 bench/gpu_decode_bench.py --write_models "$models" \
                 --sizes "${SIZES:-130m,1b}" 2>> "$full" | sed 's/: / /')
      ;;
    sweep)
      write_models
      for backend in cuda cpu; do
        if [[ $backend == cuda ]]; then
          conc="1 2 4 8 16 32 64 128 256"; args="--backend=cuda --max_slots=256 --max_queue=512"
        else
          conc="1 4 16 64"; args="--backend=cpu --cpu_threads=$(nproc) --max_slots=64"
        fi
        if [[ $backend == cuda ]]; then
          # The engine alone at each concurrency as a batch size: the
          # server's share of it follows the sweep.
          run "$here/bin/cuda_decode_bench" --model_dir="$models/mamba-130m" \
            --label=mamba-130m --batches="${conc// /,}" --steps=20 \
            > /tmp/engine.log 2>&1
        fi
        say "== sweep: server on $backend, mamba-130m shape, in=64 out=128"
        SERVER_BIN="$here/seqboat_server.sh" LOAD_BIN="$here/seqboat_load.sh" \
          PYTHON=python3 CONCURRENCIES="$conc" REQUESTS_PER_LEVEL=2 MIN_REQUESTS=16 \
          SERVER_ARGS="$args" LABEL="$backend" \
          timeout -k 5 300 bash deploy/bench_sweep.sh "$models/mamba-130m" \
          "/tmp/sweep_$backend" > /tmp/sweep.log 2>&1
        rc=$?
        say "sweep $backend: exit $rc"
        sed -n '/^ *conc /,$p' /tmp/sweep.log | tee -a "$report"
        { echo "===== sweep $backend (exit $rc)"; cat /tmp/sweep.log;
          echo "----- server log"; tail -c 262144 "/tmp/sweep_$backend/server.log"; } >> "$full"
        ((rc == 0)) || status=1
        if [[ $backend == cuda ]]; then
          say "== the server's share of the engine's tok/s at the same batch"
          share_table /tmp/engine.log /tmp/sweep_cuda/c*.json
        fi
      done
      python3 clients/load/plot.py --out "$out/sweep.png" \
        --title "seqboat server, 130M Mamba shape, in=64 out=128: CUDA vs CPU" \
        /tmp/sweep_cuda/c*.json /tmp/sweep_cpu/c*.json >> "$full" 2>&1
      ;;
    *) say "unknown phase $phase"; status=2 ;;
  esac
done
exit $status
EXTRA

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every packed GPU test, then the decode benchmark, then (if
# compute-sanitizer is there, in the time left) each test under memcheck,
# all inside a 9-minute budget (SEQBOAT_GPU_BUDGET_S). Tests read model files
# by paths relative to the repository root, which is where this runs from.
# Usage: bash .gpu_bundle/run.sh OUT_DIR
# OUT_DIR gets four files: summary.txt, tests.log, memcheck.log, bench.txt.
set -uo pipefail
bundle="$(cd "$(dirname "$0")" && pwd)"
out="${1:-/tmp/gpu_out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$bundle/.."
start=$SECONDS
budget="${SEQBOAT_GPU_BUDGET_S:-540}"
left() { echo $((budget - (SECONDS - start))); }
# Seconds for the next phase: at most $1, and never eating into $2 seconds
# kept for later phases.
slice() {
  local s=$(($(left) - $2))
  ((s > $1)) && s=$1
  echo "$s"
}
source "$bundle/env.sh"
summary="$out/summary.txt"
rm -f "$summary" "$out/tests.log" "$out/memcheck.log" "$out/bench.txt"
say() { echo "$*" | tee -a "$summary"; }
# Appends a log to a merged file under a header, at most 3 MiB of it.
merge() {
  { echo "===== $2"; head -c 3145728 "$1"; echo; } >> "$3"
}

{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } \
  2>&1 | tee -a "$summary"
say "library path: $libs"
# Where the CUDA libraries resolve from, or what is missing.
run --list "$here/bin/dense_ops_gpu_test" 2>&1 |
  grep -E 'not found|libcud|libcublas' | tee -a "$summary"

status=0
# The op tests first, the whole-model and engine tests (slowest under
# memcheck) last.
tests=()
for t in "$here"/bin/*_ops_gpu_test "$here"/bin/*_gpu_test; do
  [[ -x "$t" ]] || continue
  [[ " ${tests[*]} " == *" $t "* ]] || tests+=("$t")
done
log="$here/test.log"
# Each test gets at most 240 s, keeping 200 s for the benchmark.
for t in "${tests[@]}"; do
  name="$(basename "$t")"
  s=$(slice 240 200)
  if ((s < 10)); then
    say "SKIP $name (time budget)"; status=1; continue
  fi
  timeout -k 5 "$s" "$loader" --library-path "$libs" "$t" > "$log" 2>&1
  rc=$?
  if ((rc == 0)); then
    say "PASS $name"
  else
    say "FAIL $name (exit $rc$( ((rc == 124)) && echo ", timed out after ${s}s"))"
    status=1
  fi
  tail -3 "$log" | tee -a "$summary"
  merge "$log" "$name (exit $rc)" "$out/tests.log"
done

# The benchmark, through the wrapper that runs it with the packed libraries.
s=$(slice 240 0)
if ((s >= 30)); then
  # bf16 and fp8 weights side by side (fp8's gain is at the GEMV's batches).
  PYTHONUNBUFFERED=1 timeout -k 5 "$s" python3 bench/gpu_decode_bench.py \
    --binary "$here/cuda_decode_bench.sh" --weights bf16,fp8 \
    > "$out/bench.txt" 2>&1
  say "bench: exit $? ($((SECONDS - start)) s elapsed)"
else
  say "bench: skipped (time budget)"
fi

# memcheck in the time left; the long sequential prefill of the seqboat
# window test would take minutes under instrumentation.
if [[ -n "$sanitizer" ]]; then
  for t in "${tests[@]}"; do
    name="$(basename "$t")"
    if [[ "$name" == device_fault_gpu_test ]]; then
      say "memcheck $name: skipped (it faults on purpose)"; continue
    fi
    s=$(slice 150 5)
    if ((s < 20)); then
      say "memcheck $name: skipped (time budget)"; continue
    fi
    timeout -k 5 "$s" "$sanitizer" --tool memcheck --error-exitcode 9 \
      --print-limit 50 "$loader" --library-path "$libs" "$t" \
      --gtest_filter='-*SeqBoatParityTest.LargeWindow/*' > "$log" 2>&1
    rc=$?
    say "memcheck $name: exit $rc$( ((rc == 124)) && echo " (timed out)")"
    tail -2 "$log" | tee -a "$summary"
    merge "$log" "memcheck $name (exit $rc)" "$out/memcheck.log"
    ((rc == 0 || rc == 124)) || status=1
  done
else
  say "memcheck: compute-sanitizer not found"
fi
say "total $((SECONDS - start)) s, status $status"
exit $status
RUN
chmod +x "$out/run.sh" "$out/extra.sh"
du -sh "$out"

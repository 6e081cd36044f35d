#!/usr/bin/env bash
# Packs the GPU tests and the GPU benchmark, with every shared library they
# load (glibc and its loader included), into .gpu_bundle/ so that a machine
# with a GPU but without this project's toolchain can run them all:
#
#   bash kernels/gpu_bundle.sh                 # here: build and pack
#   bash .gpu_bundle/run.sh OUT_DIR            # there, from the repo root
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

tests=(dense_ops mamba_ops s4d_ops attention_ops seqboat_ops sampling_ops model engine
       device_fault)
targets=()
for t in "${tests[@]}"; do
  [[ -f "kernels/${t}_gpu_test.cc" ]] && targets+=("//kernels:${t}_gpu_test")
done
targets+=(//kernels/bench:cuda_decode_bench)
bazel build "${targets[@]}"

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
here=/tmp/seqboat_gpu_bundle
rm -rf "$here"
mkdir -p "$here"
tar -C "$here" -xJf "$bundle/payload.tar.xz"
summary="$out/summary.txt"
rm -f "$summary" "$out/tests.log" "$out/memcheck.log" "$out/bench.txt"
say() { echo "$*" | tee -a "$summary"; }
# Appends a log to a merged file under a header, at most 3 MiB of it.
merge() {
  { echo "===== $2"; head -c 3145728 "$1"; echo; } >> "$3"
}

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

{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } \
  2>&1 | tee -a "$summary"
say "library path: $libs"
# Where the CUDA libraries resolve from, or what is missing.
run --list "$here/bin/dense_ops_gpu_test" 2>&1 |
  grep -E 'not found|libcud|libcublas' | tee -a "$summary"
sanitizer="$(command -v compute-sanitizer ||
  ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"

status=0
# The op tests first, the whole-model and engine tests (slowest under
# memcheck) last.
tests=()
for t in "$here"/bin/*_ops_gpu_test "$here"/bin/*_gpu_test; do
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

# The benchmark, through a wrapper that runs it with the packed libraries.
printf '#!/usr/bin/env bash\nexec "%s" --library-path "%s" "%s" "$@"\n' \
  "$loader" "$libs" "$here/bin/cuda_decode_bench" > "$here/bench.sh"
chmod +x "$here/bench.sh"
s=$(slice 240 0)
if ((s >= 30)); then
  PYTHONUNBUFFERED=1 timeout -k 5 "$s" python3 kernels/bench/gpu_decode_bench.py \
    --binary "$here/bench.sh" > "$out/bench.txt" 2>&1
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
      --gtest_filter=-SeqBoatOpsGpuTest.LargeWindow > "$log" 2>&1
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
chmod +x "$out/run.sh"
du -sh "$out"

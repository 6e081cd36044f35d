#!/usr/bin/env bash
# Packs the GPU tests and the GPU benchmark, with every shared library they
# load (glibc and its loader included), into .gpu_bundle/ so that a machine
# with a GPU but without this project's toolchain can run them all:
#
#   bash kernels/gpu_bundle.sh                 # here: build and pack
#   bash .gpu_bundle/run.sh OUT_DIR            # there, from the repo root
#
# CUDA's own libraries (driver, runtime, cuBLAS) are not packed: run.sh finds
# the GPU machine's. Logs and figures go to OUT_DIR.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

tests=(dense_ops mamba_ops s4d_ops attention_ops seqboat_ops sampling_ops model engine)
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
# rpaths are relative), except CUDA's: the GPU machine's must match its
# driver.
for b in "${built[@]}"; do ldd "$b"; done |
  awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libcuda|libcudart|libcublas|libcublasLt|libnvidia)[^/]*$' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib/"
tar -C "$stage" -cJf "$out/payload.tar.xz" bin lib

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every packed GPU test, then each under compute-sanitizer memcheck, then
# the decode benchmark. Run from the repository root (tests read model files
# by relative path). Usage: bash .gpu_bundle/run.sh OUT_DIR
set -uo pipefail
bundle="$(cd "$(dirname "$0")" && pwd)"
out="${1:-/tmp/gpu_out}"
here=/tmp/seqboat_gpu_bundle
rm -rf "$here"
mkdir -p "$here"
tar -C "$here" -xJf "$bundle/payload.tar.xz"
mkdir -p "$out"
cuda_libs=""
for d in /usr/local/nvidia/lib64 /usr/local/cuda/lib64 \
         /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; p = list(nvidia.__path__)[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2>/dev/null); do
  [[ -d "$d" ]] && cuda_libs="$cuda_libs:$d"
done
libs="$here/lib$cuda_libs"
run() { "$here/lib/ld-linux-x86-64.so.2" --library-path "$libs" "$@"; }
nvidia-smi -L | tee "$out/device.txt"
status=0
for t in "$here"/bin/*_gpu_test; do
  name="$(basename "$t")"
  if run "$t" > "$out/$name.log" 2>&1; then
    echo "PASS $name"
  else
    echo "FAIL $name"; status=1
  fi
  tail -3 "$out/$name.log"
done
if command -v compute-sanitizer > /dev/null; then
  for t in "$here"/bin/*_gpu_test; do
    name="$(basename "$t")"
    compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$here/lib/ld-linux-x86-64.so.2" --library-path "$libs" "$t" \
      > "$out/$name.memcheck.log" 2>&1
    rc=$?
    echo "memcheck $name: exit $rc"; tail -2 "$out/$name.memcheck.log"
    [[ $rc -eq 0 ]] || status=1
  done
fi
printf '#!/usr/bin/env bash\nexec "%s" --library-path "%s" "%s" "$@"\n' \
  "$here/lib/ld-linux-x86-64.so.2" "$libs" "$here/bin/cuda_decode_bench" \
  > "$out/bench.sh"
chmod +x "$out/bench.sh"
python3 kernels/bench/gpu_decode_bench.py --binary "$out/bench.sh" 2>&1 | tee "$out/bench.txt"
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out"

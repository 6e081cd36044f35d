#!/usr/bin/env bash
# Installs what is missing, builds everything (CUDA sources included: they compile
# and link without a GPU), and runs the whole test suite: the C++ tests through
# Bazel (GPU-tagged tests are skipped here; `bazel test --config=gpu //...` runs
# them where a GPU exists) and the Python tests through pytest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash deploy/setup.sh

# Without the CUDA toolkit the CUDA backend is left out of the build.
flags=()
targets=(//...)
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "no /usr/local/cuda/bin/nvcc: building without the CUDA backend"
  flags=(--define=cuda=off)
  targets=(-- //... -//kernels/cuda/... -//tools/cuda_emu/... -//third_party:cuda
           -//tests/gpu/...
           -//engine/model:cuda_fp8_emu_test
           -//bench:cuda_decode_bench)
fi

echo "== build"
bazel build "${flags[@]}" "${targets[@]}"

echo "== C++ tests"
bazel test "${flags[@]}" --test_tag_filters=-gpu "${targets[@]}"

echo "== Python tests"
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider

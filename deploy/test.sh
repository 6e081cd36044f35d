#!/usr/bin/env bash
# Installs what is missing, builds everything (CUDA sources included: they compile
# and link without a GPU), and runs the whole test suite: the C++ tests through
# Bazel (GPU-tagged tests are skipped here; `bazel test --config=gpu //...` runs
# them where a GPU exists) and the Python tests through pytest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash deploy/setup.sh

echo "== build"
bazel build //...

echo "== C++ tests"
bazel test //... --test_tag_filters=-gpu

echo "== Python tests"
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider

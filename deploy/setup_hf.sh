#!/usr/bin/env bash
# The environment that writes the Hugging Face golden files of the
# architectures transformers 4.48.3 (the project venv's, the last line on
# Debian's torch) predates: PyPI's torch and a current transformers, in .venv-hf
# apart from the project venv. The tests never need it (they read the committed
# golden files); it is for regenerating them or adding an architecture:
#
#   bash deploy/setup_hf.sh && .venv-hf/bin/python tests/data/hf_golden/make.py
#
# About a minute and 5.6 GB on a fresh machine (torch's wheel brings its CUDA
# libraries). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-hf"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup_hf: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  torch==2.15.0 transformers==5.23.0 safetensors==0.8.0 numpy==2.4.6
"$venv/bin/python" -c 'import torch, transformers; print("setup_hf: torch", torch.__version__, "transformers", transformers.__version__)'

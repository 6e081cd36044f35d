#!/usr/bin/env bash
# Installs what is missing, builds the server and starts it on the bundled
# default model. Extra arguments go to the server (e.g. --port 50052).
# README.md ("Talk to it") shows how to call it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash deploy/setup.sh
bazel build //server:seqboat_server //clients/cli:seqboat_cli
exec "$root/bazel-bin/server/seqboat_server" \
  --model_dir="${SEQBOAT_MODEL_DIR:-$root/weights/models/default}" "$@"

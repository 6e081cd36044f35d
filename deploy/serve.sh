#!/usr/bin/env bash
# Installs what is missing, builds the server and starts it on the bundled
# default model through deploy/entrypoint.sh (the container's entrypoint
# too). Extra arguments go to the server (e.g. --port 50052); --no-build
# skips set-up and build and serves the binary already built.
# README.md ("Talk to it") shows how to call it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [[ "${1:-}" == "--no-build" ]]; then
  shift
else
  bash deploy/setup.sh
  flags=()
  [[ -x /usr/local/cuda/bin/nvcc ]] || flags=(--define=cuda=off)
  bazel build "${flags[@]}" //server:seqboat_server //clients/cli:seqboat_cli
fi
export SEQBOAT_SERVER_BIN="$root/bazel-bin/server/seqboat_server"
exec "$root/deploy/entrypoint.sh" "$@"

#!/usr/bin/env bash
# Writes the Python messages, type stubs and gRPC stubs of
# proto/seqboat/v1/generate.proto into OUT (default: this package, where they
# are committed). Debian's protoc (3.21) and grpc_python_plugin (1.51) make them,
# the same releases as the python3-protobuf and python3-grpcio runtimes;
# tests/python/client checks that the committed files equal a fresh run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here}"
plugin="$(command -v grpc_python_plugin)" || {
  echo "gen_stubs: grpc_python_plugin is missing (Debian: protobuf-compiler-grpc)" >&2
  exit 1
}
mkdir -p "$out"
protoc -I"$here/../../proto" --python_out="$out" --pyi_out="$out" \
  --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  seqboat/v1/generate.proto

#!/usr/bin/env bash
# Starts seqboat_server with the deployment's settings. The one place that
# turns the SEQBOAT_* environment into server flags: deploy/serve.sh runs it
# after building, the container images use it as their ENTRYPOINT, and the
# Kubernetes manifests set the same variables. Extra arguments go to the
# server and win over these defaults (flags parse left to right).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# The binary: $SEQBOAT_SERVER_BIN, else the image layout
# (/opt/seqboat/{deploy,bin}), else the checkout's Bazel output.
bin="${SEQBOAT_SERVER_BIN:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$here/../bin/seqboat_server" \
                   "$here/../bazel-bin/server/seqboat_server"; do
    if [[ -x "$candidate" ]]; then bin="$candidate"; break; fi
  done
fi
if [[ -z "$bin" || ! -x "$bin" ]]; then
  echo "entrypoint: no seqboat_server binary (build it or set SEQBOAT_SERVER_BIN)" >&2
  exit 1
fi

model_dir="${SEQBOAT_MODEL_DIR:-$here/../weights/models/default}"
if [[ ! -f "$model_dir/config.json" ]]; then
  echo "entrypoint: no model at $model_dir (set SEQBOAT_MODEL_DIR or mount one)" >&2
  exit 1
fi

# API keys (README.md, "API keys"): a file mounted from a Secret; its keys
# are reread on SIGHUP. Unset: no keys.
keys=()
[[ -n "${SEQBOAT_API_KEYS_FILE:-}" ]] && keys+=(--api_keys_file="$SEQBOAT_API_KEYS_FILE")
[[ -n "${SEQBOAT_METRICS_API_KEY_FILE:-}" ]] &&
  keys+=(--metrics_api_key_file="$SEQBOAT_METRICS_API_KEY_FILE")

# The prefix cache's disk tier (README.md, "Snapshots on disk"): a directory
# on the replica's own volume. Unset: none.
cache=(--prefix_cache_bytes="${SEQBOAT_PREFIX_CACHE_BYTES:-1073741824}")
if [[ -n "${SEQBOAT_PREFIX_CACHE_DIR:-}" ]]; then
  cache+=(--prefix_cache_dir="$SEQBOAT_PREFIX_CACHE_DIR"
          --prefix_cache_disk_bytes="${SEQBOAT_PREFIX_CACHE_DISK_BYTES:-8589934592}")
fi
# The other replicas, asked for a snapshot this one lacks (deploy/README.md,
# "Conversations and replicas"): host:port,... Unset: none.
[[ -n "${SEQBOAT_PREFIX_CACHE_PEERS:-}" ]] &&
  cache+=(--prefix_cache_peers="$SEQBOAT_PREFIX_CACHE_PEERS")
[[ -n "${SEQBOAT_PREFIX_CACHE_PEER_API_KEY_FILE:-}" ]] &&
  cache+=(--prefix_cache_peer_api_key_file="$SEQBOAT_PREFIX_CACHE_PEER_API_KEY_FILE")
for v in CA CERT KEY; do
  f="SEQBOAT_PREFIX_CACHE_PEER_TLS_${v}_FILE"
  [[ -n "${!f:-}" ]] && cache+=(--prefix_cache_peer_tls_${v,,}_file="${!f}")
done
[[ -n "${SEQBOAT_PREFIX_CACHE_PEER_TLS_SERVER_NAME:-}" ]] &&
  cache+=(--prefix_cache_peer_tls_server_name="$SEQBOAT_PREFIX_CACHE_PEER_TLS_SERVER_NAME")

# TLS (README.md, "TLS"): PEM files mounted from Secrets; set the
# certificate and key to serve every port over TLS, the client CA for mutual
# TLS. Unset: plaintext.
tls=()
if [[ -n "${SEQBOAT_TLS_CERT_FILE:-}" ]]; then
  tls+=(--tls_cert_file="$SEQBOAT_TLS_CERT_FILE"
        --tls_key_file="${SEQBOAT_TLS_KEY_FILE:?SEQBOAT_TLS_CERT_FILE needs SEQBOAT_TLS_KEY_FILE}")
fi
[[ -n "${SEQBOAT_TLS_CLIENT_CA_FILE:-}" ]] &&
  tls+=(--tls_client_ca_file="$SEQBOAT_TLS_CLIENT_CA_FILE")
[[ -n "${SEQBOAT_TLS_HTTP_PORT_CLIENT_CERTS:-}" ]] &&
  tls+=(--tls_http_port_client_certs="$SEQBOAT_TLS_HTTP_PORT_CLIENT_CERTS")
[[ -n "${SEQBOAT_TLS_REFRESH_SECONDS:-}" ]] &&
  tls+=(--tls_refresh_seconds="$SEQBOAT_TLS_REFRESH_SECONDS")

# exec: the server is PID 1 in a container and gets SIGTERM directly.
exec "$bin" \
  --model_dir="$model_dir" \
  --host="${SEQBOAT_HOST:-0.0.0.0}" \
  --port="${SEQBOAT_PORT:-50051}" \
  --http_port="${SEQBOAT_HTTP_PORT:-8080}" \
  --openai_port="${SEQBOAT_OPENAI_PORT:-8000}" \
  --backend="${SEQBOAT_BACKEND:-auto}" \
  --max_slots="${SEQBOAT_MAX_SLOTS:-64}" \
  --max_queue="${SEQBOAT_MAX_QUEUE:-256}" \
  --drain_grace_seconds="${SEQBOAT_DRAIN_GRACE_SECONDS:-30}" \
  --cpu_threads="${SEQBOAT_CPU_THREADS:-0}" \
  --cpu_weights="${SEQBOAT_CPU_WEIGHTS:-auto}" \
  "${cache[@]}" \
  "${keys[@]}" \
  "${tls[@]}" \
  "$@"

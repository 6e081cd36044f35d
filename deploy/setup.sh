#!/usr/bin/env bash
# Installs every Debian package seqboat needs to build, test and serve, and the
# project-local Python venv. Idempotent: installs only what is missing and says so.
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap build-essential git clang-format
  # fuzz/run.sh: clang with its libFuzzer and sanitizer runtimes
  clang libclang-rt-dev
  # C++ dependencies, all linked from the system
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev libmicrohttpd-dev
  libgtest-dev libgmock-dev libopenblas-dev libopenblas-openmp-dev libre2-dev libicu-dev
  libssl-dev libgnutls28-dev
  # TLS tests make their certificates with it
  openssl
  # python: references, converters, training
  python3-torch python3-numpy python3-venv python3-pip python3-pytest python3-grpcio
  # Hydra-era fairseq checkpoints pickle their cfg as an omegaconf DictConfig
  python3-omegaconf
  # the OpenAI SDK's dependencies (the SDK itself: tests/python/requirements.txt)
  python3-httpx python3-pydantic python3-anyio python3-sniffio python3-distro
  # transformers' apply_chat_template, the reference of tests/python/chat_template
  python3-jinja2
  # the bundled model's training text
  fortunes
  # load-balancer tests
  nginx-light python3-yaml python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  [[ $(id -u) == 0 ]] && SUDO="" || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv from /usr/bin/python3 (system torch, numpy)"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
reqs=("$root/weights/requirements.txt" "$root/tests/python/requirements.txt")
# pip leaves satisfied pins alone without asking the index, so this is cheap when
# nothing is missing. One install, so that one resolution sees every pin.
echo "setup: python requirements: $(cat "${reqs[@]}" | grep -v '^#' | tr '\n' ' ')"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  -r "${reqs[0]}" -r "${reqs[1]}"

# xgrammar's C++ core (constrained decoding, engine/grammar): its sources ship in
# its PyPI source release. Bazel compiles them from this fixed folder (WORKSPACE's
# @xgrammar, third_party/xgrammar.BUILD); no Python part of it is built or used.
xgrammar_version="0.2.8"
xgrammar_sha256="8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80"
xgrammar_dir="/opt/xgrammar-$xgrammar_version"
if [[ ! -f "$xgrammar_dir/include/xgrammar/xgrammar.h" ]]; then
  echo "setup: fetching xgrammar $xgrammar_version sources into $xgrammar_dir"
  tmp="$(mktemp -d)"
  # --no-binary for xgrammar alone: its build tools still come as wheels.
  "$venv/bin/python" -m pip download -q --no-deps --no-binary xgrammar \
    "xgrammar==$xgrammar_version" -d "$tmp"
  echo "$xgrammar_sha256  $tmp/xgrammar-$xgrammar_version.tar.gz" | sha256sum -c --quiet
  [[ $(id -u) == 0 ]] && SUDO="" || SUDO="sudo"
  $SUDO tar -xzf "$tmp/xgrammar-$xgrammar_version.tar.gz" -C /opt
  rm -rf "$tmp"
else
  echo "setup: xgrammar $xgrammar_version sources present"
fi

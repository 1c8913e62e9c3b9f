#!/usr/bin/env bash
# Installs everything Synod needs on a fresh machine, idempotently, and writes
# $SYNOD_CACHE/env.sh, which the other scripts source.
#
#  - Debian packages: pkg-config and fontconfig/freetype headers (PNG plots); protobuf-compiler,
#    clang and libclang-dev (Substrate's libp2p and librocksdb-free node build); libssl-dev, which
#    the node's WebRTC transport (litep2p's str0m) links instead of compiling OpenSSL from source
#    (OPENSSL_NO_VENDOR in env.sh: 222 s less of a cold build).
#  - Rust: the wasm32-unknown-unknown target and rust-src (the runtime's wasm build).
#  - Node.js packages for the Polkadot.js scripts (scripts/polkadot-js, from package-lock.json):
#    @polkadot/api (its browser bundles also serve the web dashboard) and playwright-core.
#  - The zombienet CLI (zombienet/package.json, @zombienet/cli with the toml@3.0.0 override) for
#    the multi-node tests (scripts/zombienet.sh, native provider).
#  - Debian's chromium: the dashboard's browser test drives it headless (playwright-core's own
#    browser download does not work here).
#  - A project virtualenv at $SYNOD_CACHE/venv with torch==2.13.0 (the libtorch that tch 0.26
#    links, used through LIBTORCH_USE_PYTORCH=1), safetensors and numpy.
#  - A persistent cargo target dir at $SYNOD_CACHE/target (kept across clones and CI runs).
set -euo pipefail

SYNOD_CACHE=${SYNOD_CACHE:-$HOME/.cache/synod}
TORCH_VERSION=2.13.0
mkdir -p "$SYNOD_CACHE"

need_apt=()
for pkg in pkg-config libfontconfig1-dev libfreetype-dev libssl-dev protobuf-compiler clang libclang-dev chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  echo "setup: installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: rustup target add wasm32-unknown-unknown" >&2
  rustup target add wasm32-unknown-unknown
fi
if ! rustup component list --installed | grep -q '^rust-src'; then
  echo "setup: rustup component add rust-src" >&2
  rustup component add rust-src
fi

JS_DIR="$(cd "$(dirname "$0")" && pwd)/polkadot-js"
if [ ! -d "$JS_DIR/node_modules/@polkadot/api" ] || [ ! -d "$JS_DIR/node_modules/playwright-core" ]; then
  echo "setup: npm ci in $JS_DIR" >&2
  (cd "$JS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi

ZN_DIR="$(cd "$(dirname "$0")/.." && pwd)/zombienet"
if [ ! -x "$ZN_DIR/node_modules/.bin/zombienet" ]; then
  echo "setup: npm ci in $ZN_DIR (the zombienet CLI)" >&2
  (cd "$ZN_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi

VENV="$SYNOD_CACHE/venv"
if ! "$VENV/bin/python" -c "import torch, safetensors, numpy; assert torch.__version__.startswith('$TORCH_VERSION')" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION into $VENV (about 2.5 min, 4.7 GB)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" safetensors numpy
fi

cat > "$SYNOD_CACHE/env.sh" <<ENV
# Written by scripts/setup.sh.
export SYNOD_CACHE="$SYNOD_CACHE"
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:\$PATH"
export LIBTORCH_USE_PYTORCH=1
export SYNOD_PYTHON="$VENV/bin/python"
export CARGO_TARGET_DIR="\${CARGO_TARGET_DIR:-$SYNOD_CACHE/target}"
export OPENSSL_NO_VENDOR=1
ENV
echo "setup: ok ($SYNOD_CACHE/env.sh)" >&2

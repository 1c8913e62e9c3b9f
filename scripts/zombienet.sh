#!/usr/bin/env bash
# Runs Synod's zombienet tests (zombienet/*.zndsl) with the zombienet CLI's native provider,
# pinned in zombienet/package.json (installed by scripts/setup.sh): every node is a local
# `synod-node` process, every trainer a local `synod-trainer` (debug builds from
# $CARGO_TARGET_DIR/debug; built here if missing).
#
#   ./scripts/zombienet.sh            # all tests, in order
#   ./scripts/zombienet.sh 0002       # the tests whose file name starts with 0002
#
# Logs of each run stay in the directory zombienet prints ("To see the full logs…").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
export SYNOD_ROOT="$PWD"
export SYNOD_DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
BIN="$CARGO_TARGET_DIR/debug"
[ -x "$BIN/synod-node" ] && [ -x "$BIN/synod-trainer" ] || cargo test --workspace --locked --no-run --quiet
export PATH="$BIN:$PATH"
ZOMBIENET="$PWD/zombienet/node_modules/.bin/zombienet"
[ -x "$ZOMBIENET" ] || { echo "zombienet CLI missing: run scripts/setup.sh" >&2; exit 1; }
tests=()
for f in zombienet/*.zndsl; do
  name=$(basename "$f")
  if [ $# = 0 ]; then tests+=("$f"); else for p in "$@"; do [[ $name == "$p"* ]] && tests+=("$f"); done; fi
done
[ ${#tests[@]} -gt 0 ] || { echo "no zombienet test matches $*" >&2; exit 1; }
for t in "${tests[@]}"; do
  echo "== zombienet -p native test $t" >&2
  start=$SECONDS
  "$ZOMBIENET" -p native test "$t" >"${TMPDIR:-/tmp}/zombienet-$(basename "$t" .zndsl).log" 2>&1 || {
    echo "zombienet test $t failed ($((SECONDS - start)) s); its output:" >&2
    sed 's/\x1b\[[0-9;]*m//g' "${TMPDIR:-/tmp}/zombienet-$(basename "$t" .zndsl).log" | grep -v '^\s*$' | tail -60 >&2
    exit 1
  }
  sed 's/\x1b\[[0-9;]*m//g' "${TMPDIR:-/tmp}/zombienet-$(basename "$t" .zndsl).log" | grep -E '✅|❌|Result:' >&2 || true
  echo "== $t passed in $((SECONDS - start)) s" >&2
done

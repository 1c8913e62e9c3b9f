#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test of the workspace on CPU, then the web
# dashboard's browser test (scripts/dashboard-test.sh, headless Chromium) and the zombienet
# multi-node tests (scripts/zombienet.sh: validators and trainers as real processes).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
export SYNOD_DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
test -f "$SYNOD_DATA" || { echo "missing corpus $SYNOD_DATA" >&2; exit 1; }
cargo test --workspace --locked "$@"
# The pallets' FRAME benchmarks (v2) run as tests against their mock runtimes.
pallets=(trainer-staking training-pools checkpoints challenges rewards validator-set randomness)
features=$(printf 'pallet-%s/runtime-benchmarks ' "${pallets[@]}")
cargo test --locked "${pallets[@]/#/--package=pallet-}" --features "$features" "$@"
# The web dashboard in headless Chromium, against a dev chain and a trainer (debug binaries
# from the workspace build above).
./scripts/dashboard-test.sh
# Validators (finality, churn, partition) and trainers on a 4-validator network, with zombienet.
./scripts/zombienet.sh

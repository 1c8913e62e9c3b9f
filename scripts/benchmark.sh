#!/usr/bin/env bash
# Runs the FRAME benchmarks (v2) of Synod's seven pallets on the dev runtime and regenerates each
# pallet's src/weights.rs from scripts/weight-template.hbs.
#
#   ./scripts/benchmark.sh [steps] [repeat]      (defaults 20 and 10)
#   PALLETS="validator-set" ./scripts/benchmark.sh   (only these pallets' directories)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
STEPS=${1:-20}
REPEAT=${2:-10}
# The runtime wasm is always built in release; the dev-profile node hosts it, with its host side
# (state machine, host functions, executor) optimised (Cargo.toml) but most dependencies not:
# weights measured here are ≈ 3× those of an all-optimised node (safe upper bounds).
cargo build --locked -p synod-node --features runtime-benchmarks
NODE="$CARGO_TARGET_DIR/debug/synod-node"
for dir in ${PALLETS:-trainer-staking training-pools checkpoints challenges rewards validator-set randomness}; do
  pallet="pallet_${dir//-/_}"
  "$NODE" benchmark pallet --chain dev --pallet "$pallet" --extrinsic '*' \
    --steps "$STEPS" --repeat "$REPEAT" --wasm-execution compiled \
    --template scripts/weight-template.hbs --output "pallets/$dir/src/weights.rs"
done
# The template's output is not rustfmt's layout: format it so `cargo fmt --check` stays clean.
cargo fmt --all

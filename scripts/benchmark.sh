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
# The node that measures is an operator's release build (every crate optimised, as validators
# run it), so all seven pallets' weights come from one basis; the runtime wasm is always built
# in release. Its own target profile keeps the dev build of the tests and the demo untouched.
cargo build --locked --release -p synod-node --features runtime-benchmarks
NODE="$CARGO_TARGET_DIR/release/synod-node"
for dir in ${PALLETS:-trainer-staking training-pools checkpoints challenges rewards validator-set randomness}; do
  pallet="pallet_${dir//-/_}"
  "$NODE" benchmark pallet --chain dev --pallet "$pallet" --extrinsic '*' \
    --steps "$STEPS" --repeat "$REPEAT" --wasm-execution compiled \
    --template scripts/weight-template.hbs --output "pallets/$dir/src/weights.rs"
done
# The template's output is not rustfmt's layout: format it so `cargo fmt --check` stays clean.
cargo fmt --all

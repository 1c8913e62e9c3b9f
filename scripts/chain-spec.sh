#!/usr/bin/env bash
# Regenerates chain-specs/local-testnet.json: the plain (human-readable) chain spec of the
# 4-validator local testnet (Alice, Bob, Charlie, Dave; runtime preset `local_testnet`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
cargo build --locked -p synod-node
"$CARGO_TARGET_DIR/debug/synod-node" export-chain-spec --chain local > chain-specs/local-testnet.json
echo "wrote chain-specs/local-testnet.json" >&2

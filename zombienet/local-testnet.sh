#!/usr/bin/env bash
# Starts the 4-validator local testnet on loopback: Alice, Bob, Charlie and Dave, each a
# `synod-node --validator` with its dev session keys, from chain-specs/local-testnet.json.
# Alice's RPC is ws://127.0.0.1:9944 (Bob 9945, …). Ctrl-C stops all four.
#
#   ./zombienet/local-testnet.sh [path/to/synod-node]
#
# The automated checks of this network are the zombienet tests (zombienet/*.zndsl, run by
# scripts/zombienet.sh), which start the same four validators from the same chain spec.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=${1:-${CARGO_TARGET_DIR:-$HOME/.cache/synod/target}/debug/synod-node}
SPEC=chain-specs/local-testnet.json
BASE=$(mktemp -d)
# ed25519 node key 0x…01 has peer id 12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp.
BOOT=/ip4/127.0.0.1/tcp/30333/p2p/12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$BASE"' EXIT
i=0
for who in alice bob charlie dave; do
  # Validators of a non-dev chain need a node key: fixed keys 0x…01 … 0x…04.
  extra=(--node-key "$(printf '%064x' $((i + 1)))")
  [ "$who" = alice ] || extra+=(--bootnodes "$BOOT")
  "$NODE" --chain "$SPEC" --"$who" --validator --base-path "$BASE/$who" \
    --port $((30333 + i)) --rpc-port $((9944 + i)) --prometheus-port $((9615 + i)) \
    "${extra[@]}" 2> "$BASE/$who.log" &
  pids+=($!)
  i=$((i + 1))
done
echo "4 validators running; logs in $BASE; Ctrl-C to stop" >&2
tail -f "$BASE/alice.log"

#!/usr/bin/env bash
# 0002-validator-churn's custom step (run by zombienet in its temp dir, next to the network's raw
# chain spec): the operator's path of docs/operator.md. A new `synod-node --validator` (fresh
# base path) is started with the network's chain spec and Alice as its bootnode, the standard
# flags (`--port`, `--rpc-port`, `--prometheus-port`), and must:
#   - sync to Alice's finalized head and keep importing (its own RPC and Prometheus metrics);
#   - become a validator from stake as //Eve with Polkadot.js
#     (scripts/polkadot-js/become-validator.mjs: author_rotateKeysWithOwner → trainerStaking.bond
#     → session.setKeys → validatorSet.validate), keys that `author_hasSessionKeys` confirms;
#   - author blocks after the session change: a block whose Aura author is Eve, the node's
#     "Prepared block for proposing" log line and its substrate_proposer_block_constructed
#     metric; finality goes on after the authority-set change.
# Exits non-zero with the reason on failure. Needs node and SYNOD_ROOT (scripts/zombienet.sh).
#
#   full-node-joins.sh ws://127.0.0.1:39944
set -euo pipefail
ALICE_WS=${1:-ws://127.0.0.1:39944}
ALICE_HTTP=${ALICE_WS/ws:/http:}
SPEC=../local-raw.json
[ -f "$SPEC" ] || SPEC=$(ls ../*raw*.json 2>/dev/null | head -1 || true)
[ -f "$SPEC" ] || { echo "full-node-joins: no raw chain spec next to $PWD" >&2; exit 1; }
BASE="$PWD/operator"
rm -rf "$BASE"
# Free ports below the ephemeral range (32768+ on Linux): a fixed port there can be taken by
# any outbound connection's local port, and the node then binds its RPC elsewhere. Drawn
# below the blocks the Rust tests' `free_port` claims (the 40 × 256 ports under the ephemeral
# range) and above the dashboard test's ports, so that zombienet runs beside them.
free_port() {
  python3 -c 'import random, socket
for _ in range(200):
    p = random.randrange(12000, 20000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()'
}
RPC=$(free_port) P2P=$(free_port) PROM=$(free_port)
rpc() { # url method [params-json]
  curl -sf -H 'Content-Type: application/json' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":${3:-[]}}" "$1"
}
field() { python3 -c "import json,sys; r=json.load(sys.stdin)['result']; print(eval(sys.argv[1]))" "$1"; }
finalized() { # url → finalized block number
  local h
  h=$(rpc "$1" chain_getFinalizedHead | field 'r')
  rpc "$1" chain_getHeader "[\"$h\"]" | field 'int(r["number"], 16)'
}

peer=$(rpc "$ALICE_HTTP" system_localPeerId | field 'r')
addr=$(rpc "$ALICE_HTTP" system_localListenAddresses | field 'next((a for a in r if "127.0.0.1" in a), "")')
[ -n "$addr" ] || { echo "full-node-joins: Alice listens on no 127.0.0.1 address" >&2; exit 1; }
case $addr in */p2p/*) ;; *) addr="$addr/p2p/$peer" ;; esac
target=$(finalized "$ALICE_HTTP")
echo "full-node-joins: bootnode $addr, Alice finalized #$target" >&2

# A validator keeps its network identity: generate the node key once, as an operator does.
synod-node key generate-node-key --chain "$SPEC" --base-path "$BASE" 2>"$BASE.key.log" \
  || { echo "full-node-joins: key generate-node-key failed: $(cat "$BASE.key.log")" >&2; exit 1; }
synod-node --chain "$SPEC" --validator --base-path "$BASE" --name operator --bootnodes "$addr" \
  --port $P2P --rpc-port $RPC --prometheus-port $PROM --no-mdns --no-telemetry \
  >"$BASE.log" 2>&1 &
NODE=$!
trap 'kill -9 $NODE 2>/dev/null || true' EXIT
ME="http://127.0.0.1:$RPC"
fail() { echo "full-node-joins: $*" >&2; tail -15 "$BASE.log" >&2; exit 1; }

deadline=$((SECONDS + 120))
until [ "$(finalized "$ME" 2>/dev/null || echo 0)" -ge "$target" ]; do
  [ $SECONDS -lt $deadline ] || fail "did not reach Alice's finalized #$target in 120 s"
  kill -0 $NODE 2>/dev/null || fail "synod-node exited"
  sleep 1
done
first=$(finalized "$ME")
peers=$(rpc "$ME" system_health | field 'r["peers"]')
[ "$peers" -ge 1 ] || fail "no peers"
# Still following: finality moves on at the new node.
deadline=$((SECONDS + 60))
until [ "$(finalized "$ME")" -gt "$first" ]; do
  [ $SECONDS -lt $deadline ] || fail "finality stalled at #$first on the new node"
  sleep 1
done
metrics=$(curl -sf "http://127.0.0.1:$PROM/metrics") || fail "no Prometheus endpoint on port $PROM"
grep -qE '^substrate_block_height\{.*status="finalized"' <<<"$metrics" \
  || fail "no substrate_block_height on its Prometheus endpoint"
echo "full-node-joins: synced to #$first with $peers peers, finality moving" >&2
kill -0 $NODE 2>/dev/null || fail "synod-node exited"
out=$(node "${SYNOD_ROOT:?}/scripts/polkadot-js/become-validator.mjs" "ws://127.0.0.1:$RPC" //Eve 2>"$BASE.js.log") \
  || fail "become-validator: $(tail -5 "$BASE.js.log") $(tail -5 <<<"$out")"
echo "$out" | sed 's/^/  /' >&2
result=$(tail -1 <<<"$out")
keys=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['keys'])" "$result") \
  || fail "no JSON summary from become-validator: $result"
has=$(rpc "$ME" author_hasSessionKeys "[\"$keys\"]" | field 'r')
[ "$has" = True ] || fail "author_hasSessionKeys($keys) = $has"
grep -q "Prepared block for proposing" "$BASE.log" || fail "no 'Prepared block for proposing' in its log"
built=$(curl -sf "http://127.0.0.1:$PROM/metrics" | awk '/^substrate_proposer_block_constructed_count/ {print $2}')
[ "${built:-0}" -ge 1 ] || fail "substrate_proposer_block_constructed_count = ${built:-none}"
# Finality goes on with Eve in the set (four of five suffice: this shows the authority-set change
# was enacted, not that Eve votes).
before=$(finalized "$ALICE_HTTP")
deadline=$((SECONDS + 60))
until [ "$(finalized "$ALICE_HTTP")" -gt $((before + 3)) ]; do
  [ $SECONDS -lt $deadline ] || fail "finality stalled at #$before after Eve joined the set"
  sleep 1
done
echo "full-node-joins: Eve validates ($result); $built blocks built by the new node; finality at #$(finalized "$ALICE_HTTP")" >&2

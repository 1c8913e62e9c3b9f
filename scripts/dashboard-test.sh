#!/usr/bin/env bash
# Browser test of the web dashboard (`synod-trainer dashboard`): starts a dev chain, creates a
# pool (tiny model, 3 rounds) and one trainer that trains it, serves the dashboard, opens it in
# headless Chromium (Debian's chromium driven by playwright-core) and checks that the pool
# appears with its round table, timeline and validation-loss chart, then stops the node and
# checks that the page says the node is unreachable. Screenshots: $OUT/dashboard.png and
# $OUT/dashboard-node-down.png. Run by scripts/test.sh after `cargo test --workspace`, whose
# debug binaries it uses (it builds them if they are missing).
#
# Knobs (environment): OUT (out/dashboard-test), SYNOD_DATA, BASE_PORT (29000: node RPC,
# p2p, trainer metrics and dashboard on BASE_PORT+0..4).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
OUT="${OUT:-out/dashboard-test}"
BASE_PORT="${BASE_PORT:-29000}"
RPC_PORT=$BASE_PORT NODE_P2P=$((BASE_PORT + 1)) TRAINER_P2P=$((BASE_PORT + 2))
METRICS_PORT=$((BASE_PORT + 3)) DASHBOARD_PORT=$((BASE_PORT + 4))
RPC="ws://127.0.0.1:$RPC_PORT"
NODE="$CARGO_TARGET_DIR/debug/synod-node"
T="$CARGO_TARGET_DIR/debug/synod-trainer"
if [ ! -x "$NODE" ] || [ ! -x "$T" ]; then
  cargo test --workspace --locked --no-run
fi
CHROMIUM="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
test -n "$CHROMIUM" || { echo "dashboard-test: no chromium (scripts/setup.sh installs it)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

"$NODE" --dev --base-path "$OUT/node" --rpc-port "$RPC_PORT" --port "$NODE_P2P" \
  --no-prometheus --no-telemetry --no-mdns >"$OUT/node.log" 2>&1 &
NODE_PID=$!
PIDS+=("$NODE_PID")

RECIPE=(--data "$DATA" --model tiny --batch 8 --warmup 10 --lr 3e-3 --eval-batches 8 --device cpu)
"$T" --threads 1 pool create --rpc "$RPC" --connect-timeout 180 --suri //Alice "${RECIPE[@]}" \
  --inner-steps 10 --rounds 3 --min-trainers 1 --reward-per-round 1 --min-stake 10 \
  --round-timeout 60 --challenge-window 2 >"$OUT/pool.json" 2>"$OUT/create.log"
"$T" --threads 1 run --rpc "$RPC" --suri //Bob --pool 0 --stake 100 "${RECIPE[@]}" --quiet \
  --base-path "$OUT/trainer" --listen "/ip4/127.0.0.1/tcp/$TRAINER_P2P" \
  --prometheus-port "$METRICS_PORT" >"$OUT/trainer.jsonl" 2>"$OUT/trainer.log" &
PIDS+=($!)
"$T" dashboard --rpc "$RPC" --listen "127.0.0.1:$DASHBOARD_PORT" \
  --metrics "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/dashboard.jsonl" 2>"$OUT/dashboard.log" &
PIDS+=($!)

echo "dashboard-test: http://127.0.0.1:$DASHBOARD_PORT/ (logs in $OUT)"
if ! node scripts/polkadot-js/dashboard-test.mjs "http://127.0.0.1:$DASHBOARD_PORT/" "$OUT" "$NODE_PID" "$CHROMIUM"; then
  echo "dashboard-test failed; trainer log tail:" >&2
  tail -20 "$OUT/trainer.log" >&2
  exit 1
fi

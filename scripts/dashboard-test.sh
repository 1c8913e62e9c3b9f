#!/usr/bin/env bash
# Browser test of the web dashboard (`synod-trainer dashboard`): starts a dev chain, creates a
# pool (tiny model, 3 rounds) and one trainer that trains it, serves the dashboard, opens it in
# headless Chromium (Debian's chromium driven by playwright-core) and checks that the pool
# appears with its round table, timeline and validation-loss chart, then stops the node and
# checks that the page says the node is unreachable. Screenshots: $OUT/dashboard.png and
# $OUT/dashboard-node-down.png. Uses the debug binaries of `cargo test --workspace`: builds
# them first (`cargo test --workspace --no-run`) unless SYNOD_BUILT=1 says that build is
# current, as scripts/test.sh does once it has built the workspace.
#
# Knobs (environment): OUT (out/dashboard-test), SYNOD_DATA, BASE_PORT (21000: node RPC,
# node p2p, trainer p2p and trainer metrics on BASE_PORT+0..3, below the blocks the Rust
# tests' `free_port` claims and the range zombienet's scripts draw from, so that this test
# runs beside them; the dashboard takes a free port), CHROMIUM (the browser binary).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
OUT="${OUT:-out/dashboard-test}"
BASE_PORT="${BASE_PORT:-21000}"
RPC_PORT=$BASE_PORT NODE_P2P=$((BASE_PORT + 1)) TRAINER_P2P=$((BASE_PORT + 2))
METRICS_PORT=$((BASE_PORT + 3))
RPC="ws://127.0.0.1:$RPC_PORT"
NODE="$CARGO_TARGET_DIR/debug/synod-node"
T="$CARGO_TARGET_DIR/debug/synod-trainer"
[ "${SYNOD_BUILT:-0}" = 1 ] || cargo test --workspace --locked --no-run --quiet
CHROMIUM="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
test -n "$CHROMIUM" || { echo "dashboard-test: no chromium (scripts/setup.sh installs it)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
fail() {
  echo "dashboard-test failed: $*" >&2
  for f in node trainer dashboard; do echo "--- $OUT/$f.log (tail)" >&2; tail -15 "$OUT/$f.log" >&2 || true; done
  exit 1
}
trap cleanup EXIT INT TERM

"$NODE" --dev --base-path "$OUT/node" --rpc-port "$RPC_PORT" --port "$NODE_P2P" \
  --no-prometheus --no-telemetry --no-mdns >"$OUT/node.log" 2>&1 &
NODE_PID=$!
PIDS+=("$NODE_PID")

RECIPE=(--data "$DATA" --model tiny --batch 8 --warmup 10 --lr 3e-3 --eval-batches 8 --device cpu)
# A challenge window of 15 blocks rather than the derived one: the trainer measures its step
# time again before it joins, on a machine that other tests may load more than at creation.
"$T" --threads 1 pool create --rpc "$RPC" --connect-timeout 180 --suri //Alice "${RECIPE[@]}" \
  --inner-steps 10 --rounds 3 --min-trainers 1 --reward-per-round 1 --min-stake 10 \
  --round-timeout 300 --challenge-window 15 >"$OUT/pool.json" 2>"$OUT/create.log" || fail "pool create: $(tail -3 "$OUT/create.log")"
"$T" --threads 1 run --rpc "$RPC" --suri //Bob --pool 0 --stake 100 "${RECIPE[@]}" --quiet \
  --base-path "$OUT/trainer" --listen "/ip4/127.0.0.1/tcp/$TRAINER_P2P" \
  --prometheus-port "$METRICS_PORT" >"$OUT/trainer.jsonl" 2>"$OUT/trainer.log" &
PIDS+=($!)
"$T" dashboard --rpc "$RPC" --listen 127.0.0.1:0 \
  --metrics "http://127.0.0.1:$METRICS_PORT/metrics" >"$OUT/dashboard.jsonl" 2>"$OUT/dashboard.log" &
PIDS+=($!)

DASHBOARD_PID=$!
# The dashboard prints {"event":"dashboard","url":…} once it listens.
URL=""
for _ in $(seq 300); do
  URL=$(python3 -c 'import json,sys; print(next((json.loads(l)["url"] for l in open(sys.argv[1]) if "dashboard" in l), ""))' "$OUT/dashboard.jsonl" 2>/dev/null || true)
  [ -n "$URL" ] && break
  kill -0 "$DASHBOARD_PID" 2>/dev/null || fail "synod-trainer dashboard exited"
  sleep 0.2
done
[ -n "$URL" ] || fail "the dashboard never printed its URL"
echo "dashboard-test: $URL (logs in $OUT)"
node scripts/polkadot-js/dashboard-test.mjs "$URL" "$OUT" "$NODE_PID" "$CHROMIUM" || fail "in the browser"


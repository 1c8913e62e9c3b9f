#!/usr/bin/env bash
# The main job: a local Synod chain (synod-node --dev) and three trainers (//Bob, //Charlie,
# //Dave) that join a training pool on-chain and train a GPT on tinyshakespeare with DiLoCo,
# exchanging int8 pseudo-gradients over libp2p and committing every round's checkpoint hash
# on-chain. Prints each final round (on-chain hash, validation loss, contributors), the rewards
# claimed, a loss plot, and a one-line JSON summary. Cleans up its processes.
# Every trainer verifies the others (replays a sample of each final round) and serves as a
# juror. BYZANTINE=1 adds a fourth trainer, //Eve, that announces 100× scaled pseudo-gradients
# (`--fault scale-x100`): the demo prints its challenge, the jury's votes and the slash next to
# the honest rounds. The summary always has `challenges`, `convicted` and `slashed` (planck).
#
# Knobs (environment): ROUNDS (6), H (inner steps, 50), MODEL (baby), OUT (out/demo),
# SYNOD_DATA (../shared/data/tinyshakespeare.txt), RPC_PORT (19944), P2P_BASE (41000),
# PROMETHEUS_BASE (9616: trainer i serves http://127.0.0.1:PROMETHEUS_BASE+i/metrics),
# DASHBOARD_PORT (8090: the web dashboard, http://127.0.0.1:DASHBOARD_PORT/),
# BYZANTINE (0), CHALLENGE_WINDOW and ROUND_TIMEOUT (blocks; default: what `pool create`
# derives from the recipe's measured verification cost, `synod_diloco::budget`),
# OVERLAP (0; 1: overlapped rounds, `--overlap --outer-momentum 0.5` in the pool's recipe),
# CODEC (int8; sparse: top-k pseudo-gradients with verifiable error feedback,
# `--codec sparse`: SparseLoCo's outer recipe by default; not with OVERLAP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
OUT="${OUT:-out/demo}"
ROUNDS="${ROUNDS:-6}"
H="${H:-50}"
MODEL="${MODEL:-baby}"
RPC_PORT="${RPC_PORT:-19944}"
BYZANTINE="${BYZANTINE:-0}"
TERMS=()
if [ -n "${CHALLENGE_WINDOW:-}" ]; then TERMS+=(--challenge-window "$CHALLENGE_WINDOW"); fi
if [ -n "${ROUND_TIMEOUT:-}" ]; then TERMS+=(--round-timeout "$ROUND_TIMEOUT"); fi
SURIS=(//Bob //Charlie //Dave)
FAULTS=("" "" "")
if [ "$BYZANTINE" = 1 ]; then
  SURIS+=(//Eve)
  FAULTS+=(scale-x100)
fi
N=${#SURIS[@]}
STAKE=100
P2P_BASE="${P2P_BASE:-41000}"
PROMETHEUS_BASE="${PROMETHEUS_BASE:-9616}"
DASHBOARD_PORT="${DASHBOARD_PORT:-8090}"
RPC="ws://127.0.0.1:$RPC_PORT"

# One build serves the demo, the tests, the dashboard test and zombienet: the workspace's dev
# profile (hot dependencies optimised, libtorch does the heavy math). `cargo build --workspace
# --bins` shares every artifact with `cargo test --workspace` (a no-op after it) without
# compiling the test targets; a `cargo build -p …` would unify features differently and rebuild
# the runtime, a release trainer would compile the same dependencies a second time.
cargo build --workspace --bins --locked --quiet
NODE="$CARGO_TARGET_DIR/debug/synod-node"
T="$CARGO_TARGET_DIR/debug/synod-trainer"

rm -rf "$OUT"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

echo "== starting synod-node --dev (log: $OUT/node.log)"
"$NODE" --dev --base-path "$OUT/node" --rpc-port "$RPC_PORT" --port $((P2P_BASE + 100)) \
  --no-prometheus --no-telemetry --no-mdns >"$OUT/node.log" 2>&1 &
PIDS+=($!)

RECIPE=(--data "$DATA" --model "$MODEL" --batch 12 --warmup 50 --eval-batches 20)
if [ "${OVERLAP:-0}" = 1 ]; then
  RECIPE+=(--overlap --outer-momentum 0.5)
fi
if [ "${CODEC:-int8}" = sparse ]; then
  RECIPE+=(--codec sparse)
fi
echo "== creating pool 0 (Alice): $MODEL GPT, $ROUNDS outer rounds of H=$H inner steps, $N trainers"
"$T" --threads 1 pool create --rpc "$RPC" --suri //Alice "${RECIPE[@]}" --inner-steps "$H" --rounds "$ROUNDS" \
  --min-trainers "$N" --max-trainers "$N" --reward-per-round 30 --min-stake 10 \
  ${TERMS[@]+"${TERMS[@]}"} 2>"$OUT/create.log" | tee "$OUT/pool.json"

METRICS=()
for ((i = 0; i < N; i++)); do METRICS+=(--metrics "http://127.0.0.1:$((PROMETHEUS_BASE + i))/metrics"); done
"$T" dashboard --rpc "$RPC" --listen "127.0.0.1:$DASHBOARD_PORT" "${METRICS[@]}" \
  >"$OUT/dashboard.jsonl" 2>"$OUT/dashboard.log" &
PIDS+=($!)
echo "== web dashboard: http://127.0.0.1:$DASHBOARD_PORT/ (pools, rounds, stakes, challenges, live validation loss)"

for ((i = 0; i < N; i++)); do
  boots=()
  for ((j = 0; j < N; j++)); do [ "$j" != "$i" ] && boots+=(--bootnode "/ip4/127.0.0.1/tcp/$((P2P_BASE + j))"); done
  role=()
  [ -n "${FAULTS[$i]}" ] && role=(--fault "${FAULTS[$i]}" --no-jury) && echo "== ${SURIS[$i]} cheats: --fault ${FAULTS[$i]}"
  "$T" --threads 1 run --rpc "$RPC" --suri "${SURIS[$i]}" --pool 0 --stake "$STAKE" "${RECIPE[@]}" --device auto \
    --base-path "$OUT/trainer-$i" --listen "/ip4/127.0.0.1/tcp/$((P2P_BASE + i))" "${boots[@]}" --quiet \
    --prometheus-port $((PROMETHEUS_BASE + i)) \
    "${role[@]}" >"$OUT/trainer-$i.jsonl" 2>"$OUT/trainer-$i.log" &
  PIDS+=($!)
  TRAINERS[$i]=$!
done
echo "== $N trainers started (logs: $OUT/trainer-*.log; Prometheus metrics: http://127.0.0.1:$PROMETHEUS_BASE/metrics .. $((PROMETHEUS_BASE + N - 1))); following the chain"

# Print every round as it becomes final on-chain, until the trainers exit.
python3 - "$T" "$RPC" "$OUT" "${TRAINERS[@]}" <<'PY'
import json, os, subprocess, sys, time
t, rpc, out, pids = sys.argv[1], sys.argv[2], sys.argv[3], [int(p) for p in sys.argv[4:]]
def alive(p):
    try:
        os.kill(p, 0)
        return open(f"/proc/{p}/stat").read().split()[2] != "Z"
    except (OSError, IndexError):
        return False
def rows(i):
    try:
        return [json.loads(l) for l in open(f"{out}/trainer-{i}/metrics.jsonl")]
    except (OSError, ValueError):
        return []
shown = set()
while True:
    running = any(alive(p) for p in pids)
    r = subprocess.run([t, "pool", "show", "--rpc", rpc, "--pool", "0"], capture_output=True, text=True)
    if r.returncode == 0:
        show = json.loads(r.stdout)
        accounts = {m["account"]: m["index"] for m in show["members"]}
        losses = {e["round"]: e for e in rows(0) if e.get("event") == "round"}
        for f in show["final_rounds"]:
            if f["round"] in shown:
                continue
            # With overlapped rounds trainer 0 records a round once it has settled: wait for it.
            if f["status"] == "final" and f["round"] not in losses and running:
                continue
            shown.add(f["round"])
            e = losses.get(f["round"], {})
            if f["status"] == "final":
                who = sorted(accounts.get(c, -1) for c in f["contributors"])
                print(f"round {f['round']}: final {f['hash'][:18]}… val_loss {e.get('val_loss', float('nan')):.3f} "
                      f"contributors {who} inner {e.get('compute_secs', 0):.1f}s exchange {e.get('exchange_secs', 0):.2f}s "
                      f"eval {e.get('eval_secs', 0):.1f}s duties {e.get('duty_secs', 0):.1f}s "
                      f"round {e.get('wall_secs', 0):.1f}s compute utilisation {100 * e.get('compute_utilisation', 0):.0f}%", flush=True)
            else:
                print(f"round {f['round']}: {f['status']}", flush=True)
        for i in range(len(pids)):
            for k, e in enumerate(rows(i)):
                if (i, k) in shown or e.get("event") not in ("challenge", "vote"):
                    continue
                shown.add((i, k))
                if e["event"] == "challenge":
                    print(f"  trainer {i}: round {e['round']} member {e['member']} replays at distance "
                          f"{e['distance']:.3g} (tolerance 0.01): challenge {e['outcome']}", flush=True)
                elif "guilty" in e:
                    print(f"  trainer {i}: juror on challenge {e['challenge']} (round {e['round']}, member "
                          f"{e['member']}): replay distance {e['distance']:.3g}, votes "
                          f"{'guilty' if e['guilty'] else 'innocent'}", flush=True)
    if not running:
        break
    time.sleep(3)
PY
for ((i = 0; i < N; i++)); do
  wait "${TRAINERS[$i]}" || { echo "trainer $i failed; see $OUT/trainer-$i.log" >&2; tail -20 "$OUT/trainer-$i.log" >&2; exit 1; }
done

echo "== claiming rewards (waits for the challenge window and settlement)"
# A final round settles once the last challenge that can be opened on it is over, appeal
# included (`Timeline::settle_at`): `pool create` prints that many blocks after finality as
# `settle_blocks`. The trainers stop once the window has closed, so the first claim may wait up
# to the rest (and a margin of 60 blocks and 120 s).
CLAIM_WAIT=$(python3 -c "
import json
p = json.load(open('$OUT/pool.json'))
secs = p.get('terms', {}).get('block_secs', 2.0)
print(max(600, int((p['settle_blocks'] + 60) * secs) + 120))
")
for ((i = 0; i < N; i++)); do
  "$T" claim --rpc "$RPC" --suri "${SURIS[$i]}" --pool 0 --wait "$CLAIM_WAIT" 2>>"$OUT/claim.log" | tee -a "$OUT/claims.jsonl"
done
"$T" pool show --rpc "$RPC" --pool 0 2>/dev/null >"$OUT/pool-final.json"
echo "== synod-trainer status --pool 0 --base-path $OUT/trainer-0"
"$T" status --rpc "$RPC" --pool 0 --base-path "$OUT/trainer-0" 2>>"$OUT/claim.log"
cp "$OUT/trainer-0/loss.png" "$OUT/loss.png"
echo "== loss plot: $OUT/loss.png"

python3 - "$OUT" "$N" "$STAKE" <<'PY'
import json, sys
out, n, stake = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * 10**12
show = json.load(open(f"{out}/pool-final.json"))
finals = [f for f in show["final_rounds"] if f["status"] == "final"]
rows = [json.loads(l) for l in open(f"{out}/trainer-0/metrics.jsonl")]
rounds = [e for e in rows if e.get("event") == "round"]
done = [e for e in rows if e.get("event") == "done"][-1]
claims = [json.loads(l) for l in open(f"{out}/claims.jsonl")]
trained = [e for e in rounds if e["round"] > 0]
events = [json.loads(l) for i in range(n) for l in open(f"{out}/trainer-{i}/metrics.jsonl")]
convicted = sorted({who for f in finals for who, v in f.get("verdicts", {}).items() if v == "Guilty"})
for f in finals:
    for who, v in f.get("verdicts", {}).items():
        print(f"round {f['round']}: verdict on {who}: {v}", file=sys.stderr)
print(json.dumps({
    "rounds_final": len(finals),
    "trainers": len(show["members"]),
    "val_loss_first": rounds[0]["val_loss"],
    "val_loss_last": rounds[-1]["val_loss"],
    "final_checkpoint": finals[-1]["hash"][2:] if finals else None,
    "final_checkpoint_file": done["final_checkpoint_file"],
    "rewards": {c["account"]: c["claimed"] for c in claims},
    "inner_secs_per_round": round(sum(e["compute_secs"] for e in trained) / max(len(trained), 1), 3),
    "exchange_secs_per_round": round(sum(e["exchange_secs"] for e in trained) / max(len(trained), 1), 3),
    "eval_secs_per_round": round(sum(e.get("eval_secs", 0) for e in trained) / max(len(trained), 1), 3),
    # Verification, jury and challenge seconds between rounds.
    "duty_secs_per_round": round(sum(e.get("duty_secs", 0) for e in trained) / max(len(trained), 1), 3),
    # Inner seconds run within trainer 0's rounds over their wall-clock seconds, which cover
    # everything from its first inner phase to its last round's record (chain waits, duties
    # and evaluations included).
    "compute_utilisation": round(sum(e["compute_utilisation"] * e.get("wall_secs", 0) for e in trained) / max(sum(e.get("wall_secs", 0) for e in trained), 1e-9), 3),
    "plot": f"{out}/loss.png",
    "challenges": sum(1 for e in events if e.get("event") == "challenge" and e.get("outcome") == "opened"),
    "convicted": convicted,
    "slashed": {m["account"]: str(stake - int(m["active_stake"])) for m in show["members"]
                if int(m["active_stake"]) < stake},
}))
PY

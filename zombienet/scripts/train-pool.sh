#!/usr/bin/env bash
# 0003-training's custom step (run by zombienet in its temp dir): pool 0 on the 4-validator
# network, trained by three `synod-trainer run` processes (Bob, Charlie, Dave) for 6 rounds of
# the tiny GPT. Dave is killed (SIGKILL) once round 1 is final; the pool must keep finalizing
# with two of three stakes. Eve joins then (a member from the round after the one open when her
# join lands): she must catch up from the last final checkpoint, verified against its on-chain
# blake3, and contribute to a later final round. Exits non-zero, with the reason, on any failure.
#
#   train-pool.sh ws://127.0.0.1:39944
#
# Needs SYNOD_DATA and synod-trainer on PATH (scripts/zombienet.sh sets both).
set -euo pipefail
RPC=${1:-ws://127.0.0.1:39944}
OUT="$PWD/training"
rm -rf "$OUT" && mkdir -p "$OUT"
T=synod-trainer
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() {
  echo "train-pool: $*" >&2
  for f in "$OUT"/*.log; do echo "--- $f" >&2; tail -8 "$f" >&2; done
  exit 1
}
RECIPE=(--data "$SYNOD_DATA" --model tiny --batch 8 --warmup 10 --lr 3e-3 --eval-batches 8 --device cpu)
# A challenge window of 15 blocks, not the one `pool create` derives from the step time it
# measures: the trainers measure theirs again before they join, and on a machine loaded by
# other tests (scripts/test.sh runs zombienet beside the chain e2e) a window derived at the
# creator's load can be too short for theirs, and they refuse the pool.
"$T" --threads 1 pool create --rpc "$RPC" --connect-timeout 180 --suri //Alice "${RECIPE[@]}" \
  --inner-steps 10 --rounds 6 --min-trainers 3 --reward-per-round 1 --min-stake 10 \
  --round-timeout 60 --challenge-window 15 >"$OUT/pool.json" 2>"$OUT/create.log" ||
  fail "pool create failed"

SURIS=(//Bob //Charlie //Dave //Eve)
PORTS=(39400 39401 39402 39403)
trainer() { # index
  local i=$1 boots=()
  for ((j = 0; j < 4; j++)); do [ "$j" != "$i" ] && boots+=(--bootnode "/ip4/127.0.0.1/tcp/${PORTS[$j]}"); done
  "$T" --threads 1 run --rpc "$RPC" --suri "${SURIS[$i]}" --pool 0 --stake 100 "${RECIPE[@]}" --quiet \
    --base-path "$OUT/trainer-$i" --listen "/ip4/127.0.0.1/tcp/${PORTS[$i]}" "${boots[@]}" \
    --no-prometheus --round-deadline 60 >"$OUT/trainer-$i.jsonl" 2>"$OUT/trainer-$i.log" &
  PIDS+=($!)
}
show() { "$T" pool show --rpc "$RPC" --pool 0 2>/dev/null; }
finals() { show | python3 -c 'import json,sys; print(sum(f["status"] == "final" for f in json.load(sys.stdin)["final_rounds"]))' 2>/dev/null || echo 0; }
wait_finals() { # count, seconds
  local deadline=$((SECONDS + $2))
  until [ "$(finals)" -ge "$1" ]; do
    [ $SECONDS -lt $deadline ] || fail "fewer than $1 final rounds after $2 s"
    sleep 2
  done
}

for i in 0 1 2; do trainer "$i"; done
wait_finals 1 400
kill -9 "${PIDS[2]}"
echo "train-pool: round 1 final; Dave killed" >&2
# Eve joins now: a member from the round after the one open when her join lands.
trainer 3
wait_finals 6 600
for i in 0 1 3; do wait "${PIDS[$i]}" || fail "trainer $i exited with an error"; done

show >"$OUT/pool-final.json"
python3 - "$OUT" <<'PY' || fail "checks failed"
import json, sys
out = sys.argv[1]
show = json.load(open(f"{out}/pool-final.json"))
assert show["status"] == "Completed", show["status"]
finals = {f["round"]: f for f in show["final_rounds"] if f["status"] == "final"}
assert sorted(finals) == [1, 2, 3, 4, 5, 6], sorted(finals)
eve = [json.loads(l) for l in open(f"{out}/trainer-3/metrics.jsonl")]
joined = next(e for e in eve if e["event"] == "joined")
start = joined["from_round"]
assert start >= 2, f"Eve joined after round 1 but is a member from round {start}"
# Eve's first checkpoint is the final one of round start - 1, checked against the chain.
synced = next(e for e in eve if e["event"] == "synced")
assert synced["round"] == start - 1, synced
assert "0x" + synced["hash"] == finals[start - 1]["hash"], (synced, finals[start - 1]["hash"])
who = joined["account"]
contributed = [r for r, f in finals.items() if who in f["contributors"]]
assert contributed and min(contributed) >= start, f"Eve contributed to {contributed}"
print(f"train-pool: rounds 1-6 final; Eve synced round {start - 1} ({synced['hash'][:16]}…) and contributed to {contributed}")
PY

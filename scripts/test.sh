#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test on CPU: the workspace's tests, the pallets'
# FRAME benchmarks as tests, the web dashboard's browser test (scripts/dashboard-test.sh,
# headless Chromium) and the zombienet multi-node tests (scripts/zombienet.sh: validators and
# trainers as real processes).
#
# The suites that start nodes and trainers on loopback spend most of their time waiting for
# blocks, so they run beside the CPU-bound work, in three lanes, each at its own CPU priority
# (the chain e2e's rounds are the shortest, so its lane comes first):
#   e2e      the chain e2e (offchain-trainer/trainer/tests/chain_e2e.rs, two tests at a time)
#   network  at nice 5: dev_chain (node/tests/dev_chain.rs), the dashboard test, zombienet
#   cpu      on idle CPU only (SCHED_IDLE): builds and runs every other test target of the
#            workspace, then builds and runs the pallets' benchmark tests
# The binaries and the two loopback test targets are built first; the loopback lanes run their
# test executables directly (cargo would wait for the cpu lane's build lock). Each lane writes
# out/test-LANE.log, printed whole when it ends; the script fails when a lane fails. Every
# workspace `cargo test` call selects the whole workspace, so all of them resolve the same
# features and share one build. Extra arguments are cargo options of every `cargo test` call.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
export SYNOD_DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
test -f "$SYNOD_DATA" || { echo "missing corpus $SYNOD_DATA" >&2; exit 1; }
mkdir -p out
start=$SECONDS

# The test targets that start nodes and trainers on loopback.
loopback=(chain_e2e dev_chain)
cargo test --workspace --locked "$@" --no-run "${loopback[@]/#/--test=}" \
  --message-format=json-render-diagnostics >out/test-loopback-build.jsonl
echo "test.sh: binaries and loopback tests built in $((SECONDS - start)) s" >&2
# `NAME EXECUTABLE PACKAGE_DIR` of each loopback test target.
declare -A exe dir
while read -r name path pkg; do
  exe[$name]=$path dir[$name]=$pkg
done < <(python3 -c '
import json, os, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"], os.path.dirname(m["manifest_path"]))' \
  out/test-loopback-build.jsonl)
for t in "${loopback[@]}"; do
  [ -n "${exe[$t]:-}" ] || { echo "test.sh: no executable for test target $t" >&2; exit 1; }
done
# Every other test target of the workspace.
mapfile -t cpu_targets < <(cargo metadata --locked --no-deps --format-version 1 | python3 -c '
import json, sys
skip = set(sys.argv[1:])
for name in sorted({t["name"] for p in json.load(sys.stdin)["packages"] for t in p["targets"]
                    if "test" in t["kind"] and t["name"] not in skip}):
    print(f"--test={name}")' "${loopback[@]}")
# The scripts below use the binaries just built as they are.
export SYNOD_BUILT=1

# A loopback test target's executable, run as `cargo test` runs it (from its package's dir).
run_test() {
  echo "     Running ${exe[$1]}"
  (cd "${dir[$1]}" && "${exe[$1]}")
}
lane_e2e() {
  run_test chain_e2e
}
lane_network() {
  renice -n 5 -p "$BASHPID" >/dev/null
  run_test dev_chain
  ./scripts/dashboard-test.sh
  ./scripts/zombienet.sh
}
lane_cpu() {
  # Only on CPU the loopback lanes leave idle: their nodes and trainers keep their timing.
  chrt --idle -p 0 "$BASHPID"
  cargo test --workspace --locked "$@" --lib --bins "${cpu_targets[@]}"
  # The pallets' FRAME benchmarks (v2) as tests against their mock runtimes (their own
  # feature set, so their own build).
  local pallets=(trainer-staking training-pools checkpoints challenges rewards validator-set
    randomness)
  cargo test --locked "${pallets[@]/#/--package=pallet-}" \
    --features "$(printf 'pallet-%s/runtime-benchmarks ' "${pallets[@]}")" "$@"
}

declare -A pid
for lane in e2e network cpu; do
  (
    s=$SECONDS
    "lane_$lane" "$@"
    echo "test.sh: lane $lane passed in $((SECONDS - s)) s"
  ) >"out/test-$lane.log" 2>&1 &
  pid[$lane]=$!
done
failed=()
for lane in e2e network cpu; do
  wait "${pid[$lane]}" || failed+=("$lane")
  echo "=== lane $lane (out/test-$lane.log)" >&2
  cat "out/test-$lane.log" >&2
done
echo "test.sh: $((SECONDS - start)) s in all" >&2
[ ${#failed[@]} = 0 ] || { echo "test.sh: lanes failed: ${failed[*]}" >&2; exit 1; }

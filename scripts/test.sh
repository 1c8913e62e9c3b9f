#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test on CPU: the workspace's tests, the pallets'
# FRAME benchmarks as tests, the web dashboard's browser test (scripts/dashboard-test.sh,
# headless Chromium) and the zombienet multi-node tests (scripts/zombienet.sh: validators and
# trainers as real processes). Takes no arguments.
#
# The suites that start nodes and trainers on loopback spend most of their time waiting for
# blocks, so they run beside the CPU-bound work, in three lanes. The chain e2e's pools are
# the shortest and some derive their windows from the step time measured at creation, so
# while it runs only light work runs beside it at normal priority:
#   e2e      the chain e2e (offchain-trainer/trainer/tests/chain_e2e.rs, two tests at a time)
#   network  at nice 5: dev_chain (node/tests/dev_chain.rs: a node and Polkadot.js), then the
#            dashboard test (a node, a trainer and headless Chromium); once the e2e lane has
#            ended, zombienet (four validators and four trainers)
#   cpu      builds every other test target of the workspace and the pallets' benchmark tests
#            on idle CPU only (SCHED_IDLE); once the e2e lane has ended, runs them (some of
#            them time transfers and deadlines, so not on a starved CPU), and the doc-tests
# The binaries and the two loopback test targets are built first (cargo's timing report in
# $CARGO_TARGET_DIR/cargo-timings/); the loopback lanes run their test executables directly
# (cargo would wait for the cpu lane's build lock). Each lane writes out/test-LANE.log, with
# the time of each step, printed whole when it ends; the script fails when a lane fails, and
# stops every lane when it is interrupted. Every workspace `cargo test` call selects the whole
# workspace, so all of them resolve the same features and share one build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 0 ] || { echo "usage: ./scripts/test.sh (no arguments)" >&2; exit 2; }
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
export SYNOD_DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
test -f "$SYNOD_DATA" || { echo "missing corpus $SYNOD_DATA" >&2; exit 1; }
mkdir -p out
rm -f out/test-e2e.done
start=$SECONDS

# The test targets that start nodes and trainers on loopback.
loopback=(chain_e2e dev_chain)
cargo test --workspace --locked --no-run "${loopback[@]/#/--test=}" --timings \
  --message-format=json-render-diagnostics >out/test-loopback-build.jsonl
echo "test.sh: binaries and loopback tests built in $((SECONDS - start)) s" >&2
# `NAME EXECUTABLE PACKAGE_DIR` of each loopback test target.
declare -A exe dir
built=$(python3 -c '
import json, os, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"], os.path.dirname(m["manifest_path"]),
              sep="\t")' \
  out/test-loopback-build.jsonl)
while IFS=$'\t' read -r name path pkg; do
  exe[$name]=$path dir[$name]=$pkg
done <<<"$built"
for t in "${loopback[@]}"; do
  [ -n "${exe[$t]:-}" ] || { echo "test.sh: no executable for test target $t" >&2; exit 1; }
done
# Every other target `cargo test` runs: the libraries, the binaries and integration tests
# that are not `test = false`.
targets=$(cargo metadata --locked --no-deps --format-version 1 | python3 -c '
import json, sys
skip = set(sys.argv[1:])
selected = set()
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if not t.get("test", True):
            continue
        if any(k.endswith("lib") or k == "proc-macro" for k in t["kind"]):
            selected.add("--lib")
        elif "bin" in t["kind"]:
            selected.add("--bin=" + t["name"])
        elif "test" in t["kind"] and t["name"] not in skip:
            selected.add("--test=" + t["name"])
print("\n".join(sorted(selected)))' "${loopback[@]}")
mapfile -t cpu_targets <<<"$targets"
[ ${#cpu_targets[@]} -gt 1 ] || { echo "test.sh: no test targets found: $targets" >&2; exit 1; }
# The scripts below use the binaries just built as they are.
export SYNOD_BUILT=1

# `timed LABEL COMMAND...`: runs a step of a lane and logs its time.
timed() {
  local s=$SECONDS label=$1
  shift
  "$@"
  echo "test.sh: $label took $((SECONDS - s)) s"
}
# A loopback test target's executable, run as `cargo test` runs it (from its package's dir).
run_test() {
  echo "     Running ${exe[$1]}"
  (cd "${dir[$1]}" && "${exe[$1]}")
}
lane_e2e() {
  trap 'touch out/test-e2e.done' EXIT
  run_test chain_e2e
}
# Waits for the e2e lane to end (passed or not).
after_e2e() {
  until [ -e out/test-e2e.done ]; do sleep 2; done
}
lane_network() {
  renice -n 5 -p "$BASHPID" >/dev/null 2>&1 || true
  timed dev_chain run_test dev_chain
  timed dashboard ./scripts/dashboard-test.sh
  timed "waiting for the e2e lane" after_e2e
  timed zombienet ./scripts/zombienet.sh
}
pallets=(trainer-staking training-pools checkpoints challenges rewards validator-set randomness)
bench_tests=(cargo test --locked "${pallets[@]/#/--package=pallet-}"
  --features "$(printf 'pallet-%s/runtime-benchmarks ' "${pallets[@]}")")
lane_cpu() {
  (
    chrt --idle -p 0 "$BASHPID" 2>/dev/null || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    timed "build of the other tests" cargo test --workspace --locked --no-run "${cpu_targets[@]}"
    # The pallets' FRAME benchmarks (v2) as tests against their mock runtimes: their own
    # feature set, so their own build.
    timed "build of the benchmark tests" "${bench_tests[@]}" --no-run
  )
  timed "waiting for the e2e lane" after_e2e
  timed "the other tests" cargo test --workspace --locked "${cpu_targets[@]}"
  timed doc-tests cargo test --workspace --locked --doc
  timed "benchmark tests" "${bench_tests[@]}"
}

# Each lane in a process group of its own (job control), so that an interrupt stops all of it;
# reading nothing (a background group that reads the terminal would be stopped).
declare -A pid
trap 'for p in "${pid[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; exit 130' INT TERM
set -m
for lane in e2e network cpu; do
  (
    s=$SECONDS
    "lane_$lane"
    echo "test.sh: lane $lane passed in $((SECONDS - s)) s"
  ) </dev/null >"out/test-$lane.log" 2>&1 &
  pid[$lane]=$!
done
set +m
failed=()
for lane in e2e network cpu; do
  wait "${pid[$lane]}" || failed+=("$lane")
  # However the e2e lane ended, the lanes waiting for it go on.
  [ "$lane" != e2e ] || touch out/test-e2e.done
  echo "=== lane $lane (out/test-$lane.log)" >&2
  cat "out/test-$lane.log" >&2
done
echo "test.sh: $((SECONDS - start)) s in all" >&2
[ ${#failed[@]} = 0 ] || { echo "test.sh: lanes failed: ${failed[*]}" >&2; exit 1; }

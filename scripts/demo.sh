#!/usr/bin/env bash
# The main job. Until the chain and the P2P exchange land, it runs the trainer core: DiLoCo with
# 4 local workers on tinyshakespeare (CUDA if present, else CPU), a canonical checkpoint and its
# blake3 per outer round, JSON-lines metrics, and a loss plot.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck source=/dev/null
source "${SYNOD_CACHE:-$HOME/.cache/synod}/env.sh"
DATA="${SYNOD_DATA:-$(cd .. && pwd)/shared/data/tinyshakespeare.txt}"
OUT="${OUT:-out/demo}"
cargo build --release --locked -p synod-trainer
BIN="$CARGO_TARGET_DIR/release/synod-trainer"
rm -rf "$OUT"
"$BIN" train --data "$DATA" --workers 4 --inner-steps "${H:-50}" --rounds "${ROUNDS:-8}" \
  --model baby --batch 12 --warmup 50 --device auto --out "$OUT" "$@"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
last = rows[-1]
print(json.dumps({
    "rounds": last["round"], "workers": len(last.get("included", [])),
    "val_loss_first": rows[0]["val_loss"], "val_loss_last": last["val_loss"],
    "final_checkpoint": last.get("checkpoint_hash"),
    "final_checkpoint_file": str(out / f"round-{last['round']:06d}.safetensors"),
    "bytes_sent_per_worker": last["bytes_sent_per_worker"], "plot": str(out / "loss.png"),
}))
PY

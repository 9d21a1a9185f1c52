#!/usr/bin/env bash
# The training step with sliding-window attention against full attention, over sequence lengths
# (docs/model.md §4.9: a windowed layer's attention is O(T·W), a full one's O(T²)):
#   bash scripts/bench_window_step.sh [--device cpu|gpu] [--zaya BIN] [--config FILE]
#        [--layers N] [--window W] [--tokens "T1 T2 …"] [--full-tokens "T1 T2 …"] [--out DIR]
#        [--time-limit S]
# From --config (an original-schema config.json; default configs/models/step-bench.json on cpu,
# configs/models/gpu-step-bench.json on gpu) it derives two models of its first --layers
# sub-layers (default 8): "full", and "window" with a W-key window (default 512 on cpu, 4096 on
# gpu) on every attention sub-layer; max_position_embeddings is raised to the longest T. Each runs
# `zaya bench step --batch 1 --seq-len T --steps 2 --warmup 1 --profile-steps 1 --json` for T in
# --tokens (the windowed model; default "4096 8192 16384 32768" on cpu, "8192 32768" on gpu) and
# --full-tokens (the full one; default: the windowed list without its largest on cpu, where full
# attention at 32K takes minutes; the same list on gpu). The table: step time, tokens/s, and the
# attention's forward + backward seconds of the profiled step per token; then, for each model,
# that per-token figure at the largest T over the smallest. Exit 1 when a run fails, or when the
# windowed ratio exceeds 2 (flat is 1; full causal attention grows like T). Needs python3.
# JSON of every run under --out (default a temporary folder, removed).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

device=cpu zaya="" config="" layers=8 window="" tokens="" full_tokens="" out="" limit=0
die() {
  echo "bench_window_step: error: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2 ;;
    --zaya) zaya=$2 ;;
    --config) config=$2 ;;
    --layers) layers=$2 ;;
    --window) window=$2 ;;
    --tokens) tokens=$2 ;;
    --full-tokens) full_tokens=$2 ;;
    --out) out=$2 ;;
    --time-limit) limit=$2 ;;
    *) die "unknown argument $1 (see the top of this script)" ;;
  esac
  shift 2 || die "$1 needs a value"
done
case $device in
  cpu) : "${config:=configs/models/step-bench.json}" "${window:=512}" "${tokens:=4096 8192 16384 32768}" ;;
  gpu) : "${config:=configs/models/gpu-step-bench.json}" "${window:=4096}" "${tokens:=8192 32768}" ;;
  *) die "--device $device: cpu or gpu" ;;
esac
if [ -z "$full_tokens" ]; then
  full_tokens=$tokens
  [ "$device" = cpu ] && full_tokens=$(tr ' ' '\n' <<<"$tokens" | sort -n | head -n -1 | tr '\n' ' ')
fi
if [ -z "$zaya" ]; then
  for z in bin/zaya build/release/zaya; do [ -x "$z" ] && zaya=$z && break; done
fi
[ -x "$zaya" ] || die "no zaya binary (--zaya BIN)"
[ -f "$config" ] || die "no config $config"
command -v python3 >/dev/null || die "python3 is needed"
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
deadline=$((limit > 0 ? $(date +%s) + limit : 0))

longest=$(tr ' ' '\n' <<<"$tokens $full_tokens" | sort -n | tail -1)
python3 - "$config" "$out" "$layers" "$window" "$longest" <<'PY' || die "deriving the configs from $config failed"
import json, sys
path, out, keep, window, longest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cfg = json.load(open(path))
if "zaya_layers" not in cfg:
    sys.exit(f"{path}: not an original-schema config (no zaya_layers)")
n = cfg["num_hidden_layers"]
for k, v in list(cfg.items()):
    if isinstance(v, list) and len(v) == n:
        cfg[k] = v[:keep]
cfg["num_hidden_layers"] = min(keep, n)
cfg["max_position_embeddings"] = max(cfg.get("max_position_embeddings", 0), longest)
for name, w in (("full", 0), ("window", window)):
    cfg["swa_layers"] = [w if layer == "a" else 0 for layer in cfg["zaya_layers"]]
    json.dump(cfg, open(f"{out}/{name}.json", "w"), indent=1)
PY

failed=0
run() {  # run MODEL T
  local left=600 rc
  if [ "$deadline" -gt 0 ]; then
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt 5 ]; then
      echo "bench_window_step: $1 T=$2 not run (--time-limit spent)"
      failed=1
      return
    fi
  fi
  timeout -k 5 "$left" "$zaya" bench step --device "$device" --config "$out/$1.json" --batch 1 \
    --seq-len "$2" --steps 2 --warmup 1 --profile-steps 1 --json >"$out/$1.$2.json" 2>"$out/$1.$2.err"
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "bench_window_step: $1 T=$2: exit $rc: $(tail -1 "$out/$1.$2.err")"
    failed=1
  fi
}
for t in $tokens; do run window "$t"; done
for t in $full_tokens; do run full "$t"; done

python3 - "$out" "$window" "$tokens" "$full_tokens" <<'PY' || failed=1
import json, sys
out, window = sys.argv[1], sys.argv[2]
lists = {"window": [int(t) for t in sys.argv[3].split()], "full": [int(t) for t in sys.argv[4].split()]}
print("%-7s %7s %10s %10s %6s %12s %14s" % ("model", "T", "step s", "tokens/s", "MFU", "attention s", "attn us/token"))
per, bad = {}, False
for model in ("full", "window"):
    for t in sorted(lists[model]):
        try:
            d = json.load(open(f"{out}/{model}.{t}.json"))
        except Exception:
            continue
        a = sum(d["ops"].get(o, {}).get("seconds", 0.0) for o in ("attention_forward", "attention_backward"))
        per[(model, t)] = a / t
        print("%-7s %7d %10.3f %10.0f %6.3f %12.4f %14.3f"
              % (model, t, d["step_seconds_median"], d["tokens_per_s"], d["mfu"], a, 1e6 * a / t))
for model in ("full", "window"):
    ts = sorted(t for (m, t) in per if m == model)
    if len(ts) >= 2 and per[(model, ts[0])] > 0:
        r = per[(model, ts[-1])] / per[(model, ts[0])]
        label = "W = %s" % window if model == "window" else "full causal"
        print("%s: attention per token at T=%d over T=%d: %.2f" % (label, ts[-1], ts[0], r))
        bad = bad or (model == "window" and r > 2)
sys.exit(1 if bad else 0)
PY
exit "$failed"

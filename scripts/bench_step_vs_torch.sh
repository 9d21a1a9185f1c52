#!/usr/bin/env bash
# zaya's training step against the PyTorch eager baseline on the same model, threads and shapes,
# interleaved (zaya, torch, zaya, torch, …) so that both see the same machine; prints each round's
# tokens/s, both MFUs (PyTorch's against the sgemm rate zaya measured in the same round: both run
# the same model FLOPs on the same OpenBLAS) and the ratio, then the median ratio and the ceiling a
# zaya at 100% MFU would reach. A benchmark, not a test.
#   usage: scripts/bench_step_vs_torch.sh [ROUNDS=3] [zaya bench step flags: --config --batch
#          --seq-len --steps --warmup --threads]
# Needs Debian's python3-torch (/usr/bin/python3). `make bench-step` runs it on step-bench.
# TORCH_LIBS=DIR puts DIR first on PyTorch's library path only (not zaya's): e.g. the folder of
# another OpenBLAS build's libblas.so.3, such as Debian's default pthread one (README).
set -euo pipefail
cd "$(dirname "$0")/.."
zaya=${ZAYA:-build/release/zaya}
py=/usr/bin/python3
rounds=3
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
args=("$@")
threads=$(nproc)
for ((i = 0; i < ${#args[@]}; ++i)); do
  [ "${args[i]}" = --threads ] && threads=${args[i + 1]}
done
$py -c "import torch" 2>/dev/null || { echo "bench-step: needs python3-torch (apt-get install python3-torch)" >&2; exit 1; }
[ -x "$zaya" ] || { echo "bench-step: $zaya not built (make build)" >&2; exit 1; }

results=()
for ((r = 1; r <= rounds; ++r)); do
  z=$(OMP_NUM_THREADS=$threads "$zaya" bench step --json --threads "$threads" "${args[@]}")
  t=$(OMP_NUM_THREADS=$threads LD_LIBRARY_PATH=${TORCH_LIBS:-${LD_LIBRARY_PATH:-}} \
    $py scripts/reference/bench_torch_step.py --threads "$threads" "${args[@]}")
  results+=("$z" "$t")
  $py - "$r" "$z" "$t" <<'PY'
import json, sys
r, z, t = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
# PyTorch's share of the sgemm rate zaya measured in the same round (the same model FLOPs)
t_mfu = t['tokens_per_s'] * z['model_flops_per_token'] / (1e9 * z['sgemm_gflops'])
print(f"round {r}: zaya {z['tokens_per_s']:.0f} tok/s (MFU {100*z['mfu']:.1f}%), "
      f"pytorch eager {t['tokens_per_s']:.0f} tok/s (MFU {100*t_mfu:.1f}%), "
      f"ratio {z['tokens_per_s']/t['tokens_per_s']:.2f}x")
PY
done
$py - "${results[@]}" <<'PY'
import json, statistics, sys
rs = [json.loads(x) for x in sys.argv[1:]]
z, t = rs[0::2], rs[1::2]
ratios = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(z, t)]
t_mfu = [b["tokens_per_s"] * a["model_flops_per_token"] / (1e9 * a["sgemm_gflops"])
         for a, b in zip(z, t)]
print(f"median: zaya / pytorch eager = {statistics.median(ratios):.2f}x "
      f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}); zaya MFU "
      f"{100*statistics.median(a['mfu'] for a in z):.1f}% of sgemm; "
      f"{z[0]['config']} B={z[0]['batch']} T={z[0]['seq_len']}, {z[0]['threads']} threads")
# zaya at 100% of the sgemm rate would be 1 / (PyTorch's MFU) times PyTorch: the most any ratio
# can reach with the same BLAS and the same FLOPs.
print(f"pytorch eager MFU {100*statistics.median(t_mfu):.1f}% of the same sgemm rate: the ratio "
      f"at 100% MFU would be {1/statistics.median(t_mfu):.2f}x")
PY

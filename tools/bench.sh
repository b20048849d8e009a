#!/usr/bin/env bash
# make bench: vitc against the PyTorch reference models (tools/ref) in the same invocation, same
# threads, fp32, synthetic input at each model's resolution: training step img/s at batch 16,
# inference img/s at batch 1 and 32, peak RSS; ratios per model and their geometric mean, written to
# bench/results.json. MODELS=a,b restricts the list; THREADS (default 2), ITERS (default 5; batch 1
# runs 4 x ITERS, so that its median spans as long as the others' and not a single load burst).
# Each measurement runs REPEATS (default 2) times, vitc and PyTorch in turn, and each side's fastest
# run (its median of ITERS) counts, with the largest peak RSS: on a shared machine a neighbour's
# burst of a few seconds slows one process, not the pair.
# Then the FLOP efficiency of deit_t's training step against bare cblas_sgemm timed between its steps
# (when deit_t is in the list), and inference time per image of deit_t, agent_deit_t, flatten_deit_t
# from 224 to 896 pixels against the token ratio (SCALING=0 skips it), written to bench/scaling.json.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-deit_t,agent_deit_t,swin_t,agent_swin_t,flatten_swin_t,agent_pvt_t,agent_cswin_t,elfatt_cswin_t}
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-2}
[ "$REPEATS" -ge 1 ] 2>/dev/null || { echo "error: REPEATS=$REPEATS: expected a count of at least 1"; exit 1; }
[ "$ITERS" -ge 1 ] 2>/dev/null || { echo "error: ITERS=$ITERS: expected a count of at least 1"; exit 1; }
SCALING=${SCALING:-1}
deit_listed=
PYTHON=${PYTHON:-$(for p in python3 /usr/bin/python3; do $p -c 'import torch' 2>/dev/null && { echo $p; break; }; done)}
[ -n "$PYTHON" ] || { echo "error: make bench needs PyTorch (apt-get install python3-torch)"; exit 1; }
export OMP_NUM_THREADS=$THREADS
mkdir -p bench
out=bench/results.json
echo "[" > "$out"
first=1
printf "%-16s %-10s %10s %10s %7s %10s %10s\n" model mode vitc_img/s torch_img/s ratio vitc_MiB torch_MiB
for model in ${MODELS//,/ }; do
  cfg=$(build/release/bench --print-model --model "$model")
  for spec in train:16 infer:1 infer:32; do
    mode=${spec%%:*}; batch=${spec##*:}
    iters=$ITERS
    [ "$batch" = 1 ] && iters=$((4 * ITERS))
    [ "$model:$mode" = deit_t:train ] && deit_listed=1
    vs=() ts=()
    for ((rep = 0; rep < REPEATS; rep++)); do # vitc and PyTorch in turn, each side's best kept
      vs+=("$(build/release/bench --model "$model" --mode "$mode" --batch "$batch" --iters "$iters" --threads "$THREADS")")
      ts+=("$(cd tools/ref && $PYTHON bench_torch.py "$cfg" "$mode" "$batch" "$iters" "$THREADS")")
    done
    row=$($PYTHON - "$model" "$mode" "$batch" "$THREADS" "${vs[@]}" "${ts[@]}" <<'PY'
import json, sys
runs = [json.loads(a) for a in sys.argv[5:]]
half = len(runs) // 2
v, t = (max(side, key=lambda r: r["img_s"]) for side in (runs[:half], runs[half:]))
v["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs[:half])
t["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs[half:])
mode = {"train": "train_b16"}.get(sys.argv[2], f"infer_b{sys.argv[3]}")
print(json.dumps({"model": sys.argv[1], "mode": mode, "vitc_img_s": round(v["img_s"], 3),
                  "torch_img_s": round(t["img_s"], 3), "ratio": round(v["img_s"] / t["img_s"], 3),
                  "vitc_peak_rss_mib": v["peak_rss_mib"], "torch_peak_rss_mib": round(t["peak_rss_mib"], 1),
                  "torch_version": t["torch_version"], "threads": int(sys.argv[4])}))
PY
)
    [ $first = 1 ] || echo "," >> "$out"
    first=0
    echo "  $row" >> "$out"
    $PYTHON -c "import json,sys; r=json.loads(sys.argv[1]); print('%-16s %-10s %10.2f %10.2f %7.2f %10.0f %10.0f' % (r['model'], r['mode'], r['vitc_img_s'], r['torch_img_s'], r['ratio'], r['vitc_peak_rss_mib'], r['torch_peak_rss_mib']))" "$row"
  done
done
echo "]" >> "$out"
$PYTHON - "$out" <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))
for mode in ("train_b16", "infer_b1", "infer_b32"):
    r = [x["ratio"] for x in rows if x["mode"] == mode]
    if r:
        print(f"geometric mean vitc/torch {mode}: {math.exp(sum(map(math.log, r)) / len(r)):.3f}")
print("torch", rows[0]["torch_version"] if rows else "?", "| results in", sys.argv[1])
PY

if [ -n "$deit_listed" ]; then # training FLOPs: 2 per MAC, forward + twice as much backward
  # deit_t's step again, with bare sgemm calls of its fc1 shape at batch 16 timed before each step,
  # so that both rates come from the same seconds of a shared machine
  v=$(build/release/bench --model deit_t --mode train --batch 16 --iters "$ITERS" --threads "$THREADS" --sgemm 3152,192,768)
  $PYTHON - "$v" <<'PY'
import json, sys
v = json.loads(sys.argv[1])
step = 2 * 3 * v["gmacs"] * v["img_s"]
print(f"deit_t training step: {step:.1f} GFLOP/s (6 x {v['gmacs']:.3f} GMAC x {v['img_s']:.2f} img/s) = "
      f"{100 * step / v['sgemm_gflop_s']:.0f}% of bare cblas_sgemm {v['sgemm']} at {v['sgemm_gflop_s']:.1f} GFLOP/s, "
      "timed between the same steps")
PY
fi

[ "$SCALING" = 1 ] || exit 0
echo "inference at batch 1, ms per image (x: time / time at 224; tokens: token ratio)"
printf "%-16s %10s %10s %10s %10s   %s\n" model 224 448 672 896 "x at 896 vs tokens x16"
scaling=bench/scaling.json
echo "[" > "$scaling"
first=1
for model in deit_t agent_deit_t flatten_deit_t; do
  rows=()
  for img in 224 448 672 896; do
    rows+=("$(build/release/bench --model "$model" --mode infer --batch 1 --img "$img" --iters 3 --threads "$THREADS")")
  done
  line=$($PYTHON - "$model" "${rows[@]}" <<'PY'
import json, sys
model, rows = sys.argv[1], [json.loads(r) for r in sys.argv[2:]]
ms = [1000 * r["median_s"] for r in rows]
growth = ms[-1] / ms[0]
tokens = (rows[-1]["img"] / rows[0]["img"]) ** 2
verdict = "linear (<= 1.2 x tokens)" if growth <= 1.2 * tokens else "superlinear"
print(json.dumps({"model": model, "img": [r["img"] for r in rows], "ms_per_image": [round(m, 2) for m in ms],
                  "growth": round(growth, 2), "token_ratio": tokens, "verdict": verdict}))
PY
)
  [ $first = 1 ] || echo "," >> "$scaling"
  first=0
  echo "  $line" >> "$scaling"
  $PYTHON -c "import json,sys; r=json.loads(sys.argv[1]); m=r['ms_per_image']; print('%-16s %10.1f %10.1f %10.1f %10.1f   %.1fx vs %.0fx: %s' % (r['model'], *m, r['growth'], r['token_ratio'], r['verdict']))" "$line"
done
echo "]" >> "$scaling"


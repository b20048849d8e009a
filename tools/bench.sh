#!/usr/bin/env bash
# make bench: vitc against the PyTorch reference models (tools/ref) in the same invocation, same
# threads, fp32, synthetic input at each model's resolution: training step img/s at batch 16,
# inference img/s at batch 1 and 32, peak RSS; ratios per model and their geometric mean, written to
# bench/results.json. MODELS=a,b restricts the list; THREADS (default 2), ITERS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-deit_t,agent_deit_t,swin_t,agent_swin_t,flatten_swin_t,agent_pvt_t,agent_cswin_t,elfatt_cswin_t}
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
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
    v=$(build/release/bench --model "$model" --mode "$mode" --batch "$batch" --iters "$ITERS" --threads "$THREADS")
    t=$(cd tools/ref && $PYTHON bench_torch.py "$cfg" "$mode" "$batch" "$ITERS" "$THREADS")
    row=$($PYTHON - "$v" "$t" "$model" "$mode" "$batch" "$THREADS" <<'PY'
import json, sys
v, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
mode = {"train": "train_b16"}.get(sys.argv[4], f"infer_b{sys.argv[5]}")
print(json.dumps({"model": sys.argv[3], "mode": mode, "vitc_img_s": round(v["img_s"], 3),
                  "torch_img_s": round(t["img_s"], 3), "ratio": round(v["img_s"] / t["img_s"], 3),
                  "vitc_peak_rss_mib": v["peak_rss_mib"], "torch_peak_rss_mib": round(t["peak_rss_mib"], 1),
                  "torch_version": t["torch_version"], "threads": int(sys.argv[6])}))
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

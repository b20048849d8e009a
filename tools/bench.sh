#!/usr/bin/env bash
# make bench: vitc against what a user would run instead, in the same invocation, same threads,
# synthetic input at each model's resolution: training step img/s at batch 16, inference img/s at
# batch 1 and 32, peak RSS; in fp32 and in bf16 (vitc --precision bf16 against PyTorch's bf16
# autocast); ratios per model and their geometric means per precision and mode, written to
# bench/results.json.
# The reference is the current PyTorch from PyPI with timm, installed into bench/venv on first use
# (VENV=dir elsewhere; PYTHON=python3 picks an interpreter that has torch): timm's own models where
# timm has the architecture (deit_t, swin_t, pvt_v2_b*; fused attention), tools/ref's for the rest.
# Where PyPI cannot be reached it falls back to Debian's python3-torch with tools/ref's models, and
# says so. MODELS=a,b restricts the models, PRECISIONS=fp32 or bf16 the precisions; THREADS (default
# 2), ITERS (default 5; batch 1 runs 4 x ITERS, so that its median spans as long as the others' and
# not a single load burst). Each measurement runs REPEATS (default 2) times, vitc and PyTorch in
# turn, and each side's fastest run (its median of ITERS) counts, with the largest peak RSS: on a
# shared machine a neighbour's burst of a few seconds slows one process, not the pair.
# Each row also gives the ceiling: the img/s of a step whose every FLOP (2 per MAC; forward and twice
# as much backward in training) ran at the bare GEMM's rate (the fastest of three model shapes, timed
# before each precision's rows), which neither side can pass; a ratio whose PyTorch side already
# runs near the ceiling cannot be large on this machine, whatever vitc does.
# Then, per precision, the FLOP efficiency of deit_t's training step against the bare GEMM of that
# precision (cblas_sgemm; vitc's gemm_bf16) timed between its steps (when deit_t is in the list),
# and inference time per image of deit_t, agent_deit_t, flatten_deit_t from 224 to 896 pixels
# against the token ratio (SCALING=0 skips it), written to bench/scaling.json.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-deit_t,agent_deit_t,swin_t,agent_swin_t,flatten_swin_t,agent_pvt_t,agent_cswin_t,elfatt_cswin_t}
PRECISIONS=${PRECISIONS:-fp32,bf16}
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-2}
VENV=${VENV:-bench/venv}
[ "$REPEATS" -ge 1 ] 2>/dev/null || { echo "error: REPEATS=$REPEATS: expected a count of at least 1"; exit 1; }
[ "$ITERS" -ge 1 ] 2>/dev/null || { echo "error: ITERS=$ITERS: expected a count of at least 1"; exit 1; }
for p in ${PRECISIONS//,/ }; do
  case $p in fp32|bf16) ;; *) echo "error: PRECISIONS=$PRECISIONS: expected fp32, bf16 or both"; exit 1 ;; esac
done
SCALING=${SCALING:-1}

# the interpreter of the reference: PYTHON, else the venv (made and filled from PyPI on first use),
# else Debian's python3-torch
reference_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  if "$VENV/bin/python" -c 'import torch, timm' 2>/dev/null; then echo "$VENV/bin/python"; return; fi
  echo "installing the current torch and timm from PyPI into $VENV (once; about 5 GB)" >&2
  if python3 -m venv "$VENV" >&2 && "$VENV/bin/python" -m pip install --quiet torch timm >&2 &&
     "$VENV/bin/python" -c 'import torch, timm' 2>/dev/null; then
    echo "$VENV/bin/python"; return
  fi
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "warning: torch and timm could not be installed from PyPI into $VENV: the reference is" \
         "Debian's python3-torch with tools/ref's models, not what users run today" >&2
    echo /usr/bin/python3; return
  fi
  return 1
}
PYTHON=$(reference_python) || { echo "error: make bench needs PyTorch: PyPI could not be reached and" \
  "Debian's python3-torch is not installed (apt-get install python3-torch)"; exit 1; }
[[ $PYTHON == /* || $PYTHON != */* ]] || PYTHON=$PWD/$PYTHON # the reference runs from tools/ref
echo "reference: $($PYTHON -c 'import torch; print("torch", torch.__version__, end="")'; \
  $PYTHON -c 'import timm; print(" + timm", timm.__version__, end="")' 2>/dev/null; echo " ($PYTHON)")"

if [[ ",$PRECISIONS," == *,bf16,* ]] && ! why=$(build/release/bench --precision bf16 --sgemm 8,8,8 --iters 1 2>&1 >/dev/null); then
  echo "skipping bf16: $why"
  PRECISIONS=${PRECISIONS//bf16/}
fi
export OMP_NUM_THREADS=$THREADS
mkdir -p bench
out=bench/results.json
echo "[" > "$out"
first=1
deit_listed=
printf "%-16s %-5s %-10s %10s %10s %7s %10s %10s %10s  %s\n" model prec mode vitc_img/s torch_img/s ratio ceil_img/s vitc_MiB torch_MiB reference
for precision in ${PRECISIONS//,/ }; do
  # the ceiling: every FLOP of the step (2 per MAC, 3 passes in training) at the bare GEMM's rate,
  # the fastest of three model shapes; what neither side can pass on this machine
  peak=$(for shape in 3152,192,768 3136,384,1536 6272,768,3072; do
           build/release/bench --precision "$precision" --sgemm "$shape" --iters 9 --threads "$THREADS"
         done | $PYTHON -c 'import json, sys; print(max(json.loads(l)["gflop_s"] for l in sys.stdin))')
  echo "bare GEMM, $precision: $peak GFLOP/s (the fastest of 3152x192x768, 3136x384x1536, 6272x768x3072)"
  for model in ${MODELS//,/ }; do
    cfg=$(build/release/bench --print-model --model "$model")
    for spec in train:16 infer:1 infer:32; do
      mode=${spec%%:*}; batch=${spec##*:}
      iters=$ITERS
      [ "$batch" = 1 ] && iters=$((4 * ITERS))
      [ "$model:$mode" = deit_t:train ] && deit_listed=1
      vs=() ts=()
      for ((rep = 0; rep < REPEATS; rep++)); do # vitc and PyTorch in turn, each side's best kept
        vs+=("$(build/release/bench --model "$model" --mode "$mode" --batch "$batch" --iters "$iters" --threads "$THREADS" --precision "$precision")")
        ts+=("$(cd tools/ref && $PYTHON bench_torch.py "$cfg" "$mode" "$batch" "$iters" "$THREADS" "$precision")")
      done
      row=$($PYTHON - "$model" "$mode" "$batch" "$THREADS" "$precision" "$peak" "${vs[@]}" "${ts[@]}" <<'PY'
import json, sys
runs = [json.loads(a) for a in sys.argv[7:]]
half = len(runs) // 2
v, t = (max(side, key=lambda r: r["img_s"]) for side in (runs[:half], runs[half:]))
v["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs[:half])
t["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs[half:])
mode = {"train": "train_b16"}.get(sys.argv[2], f"infer_b{sys.argv[3]}")
peak = float(sys.argv[6])
ceiling = peak / (2 * (3 if sys.argv[2] == "train" else 1) * v["gmacs"])
print(json.dumps({"model": sys.argv[1], "mode": mode, "precision": sys.argv[5],
                  "vitc_img_s": round(v["img_s"], 3), "torch_img_s": round(t["img_s"], 3),
                  "ratio": round(v["img_s"] / t["img_s"], 3),
                  "gemm_peak_gflop_s": peak, "ceiling_img_s": round(ceiling, 3),
                  "vitc_of_ceiling": round(v["img_s"] / ceiling, 3), "torch_of_ceiling": round(t["img_s"] / ceiling, 3),
                  "vitc_peak_rss_mib": v["peak_rss_mib"], "torch_peak_rss_mib": round(t["peak_rss_mib"], 1),
                  "rss_ratio": round(v["peak_rss_mib"] / t["peak_rss_mib"], 3),
                  "vitc_kept_mib": v.get("kept_mib"),
                  "reference": t["reference"], "torch_version": t["torch_version"], "threads": int(sys.argv[4])}))
PY
)
      [ $first = 1 ] || echo "," >> "$out"
      first=0
      echo "  $row" >> "$out"
      $PYTHON -c "import json,sys; r=json.loads(sys.argv[1]); print('%-16s %-5s %-10s %10.2f %10.2f %7.2f %10.2f %10.0f %10.0f  %s' % (r['model'], r['precision'], r['mode'], r['vitc_img_s'], r['torch_img_s'], r['ratio'], r['ceiling_img_s'], r['vitc_peak_rss_mib'], r['torch_peak_rss_mib'], r['reference']))" "$row"
    done
  done
done
echo "]" >> "$out"
$PYTHON - "$out" <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for precision in ("fp32", "bf16"):
    for mode in ("train_b16", "infer_b1", "infer_b32"):
        r = [x for x in rows if x["mode"] == mode and x["precision"] == precision]
        if r:
            line = f"geometric mean vitc/torch {precision} {mode}: {gm([x['ratio'] for x in r]):.3f}"
            if mode == "train_b16":
                line += f"  (peak RSS {gm([x['rss_ratio'] for x in r]):.3f}x)"
            line += (f"; share of the ceiling: vitc {gm([x['vitc_of_ceiling'] for x in r]):.0%}, torch "
                     f"{gm([x['torch_of_ceiling'] for x in r]):.0%}")
            print(line)
print("torch", rows[0]["torch_version"] if rows else "?", "| results in", sys.argv[1])
PY

if [ -n "$deit_listed" ]; then # training FLOPs: 2 per MAC, forward + twice as much backward
  # deit_t's step again, with bare GEMM calls of its fc1 shape at batch 16 timed before each step,
  # so that both rates come from the same seconds of a shared machine
  for precision in ${PRECISIONS//,/ }; do
    v=$(build/release/bench --model deit_t --mode train --batch 16 --iters "$ITERS" --threads "$THREADS" --sgemm 3152,192,768 --precision "$precision")
    $PYTHON - "$v" <<'PY'
import json, sys
v = json.loads(sys.argv[1])
step = 2 * 3 * v["gmacs"] * v["img_s"]
print(f"deit_t training step, {v['precision']}: {step:.1f} GFLOP/s (6 x {v['gmacs']:.3f} GMAC x {v['img_s']:.2f} img/s) = "
      f"{100 * step / v['sgemm_gflop_s']:.0f}% of bare {v['sgemm_kernel']} {v['sgemm']} at {v['sgemm_gflop_s']:.1f} GFLOP/s, "
      "timed between the same steps")
PY
  done
fi

[ "$SCALING" = 1 ] || exit 0
echo "inference at batch 1, ms per image (x: time / time at 224; tokens: token ratio)"
printf "%-16s %10s %10s %10s %10s   %s\n" model 224 448 672 896 "x at 896 vs tokens x16"
scaling=bench/scaling.json
echo "[" > "$scaling"
first=1
for model in deit_t agent_deit_t flatten_deit_t; do
  rows=()
  for img in 224 448 672 896; do # each size's runs span about as long as 896's three: with three
    # at 224 too, that short median moved the ratio by half between benches (docs/performance.md)
    iters=$(( (3 * 896 * 896 + img * img - 1) / (img * img) ))
    rows+=("$(build/release/bench --model "$model" --mode infer --batch 1 --img "$img" --iters "$iters" --threads "$THREADS")")
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


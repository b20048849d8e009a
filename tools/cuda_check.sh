#!/usr/bin/env bash
# The check of the CUDA backend in one command (docs/cuda.md). On a machine with a GPU:
#   1. build: make CUDA=1 of the CUDA tests, train and bench (NCCL where the Makefile finds it, else
#      in the folder of the nvidia-nccl wheel that PyTorch brought)
#   2. tests: every CUDA test on the GPU (test_cuda); the refusal with the GPUs hidden
#      (CUDA_VISIBLE_DEVICES=); the tests again under compute-sanitizer (memcheck, racecheck,
#      synccheck) where it is installed
#   3. demo: configs/demo_fmnist.json for one epoch with --device cuda and with --device cpu, from the
#      same seed: the top-1 of both must agree within 0.5 points
#   4. bench: the training step at batch 128, vitc (bench --device cuda) against PyTorch eager
#      (tools/ref/bench_torch.py on cuda) in fp32, tf32 and bf16 (torch: TF32 off / on, bf16
#      autocast): img/s of both and their ratio, into bench/cuda.json
# and writes what ran into the cuda_check blocks of docs/cuda.md. Without a GPU it says so, builds,
# and runs the CUDA tests on the CPU emulation of CUDA (test_cuda_emu): the kernels' logic, not the
# GPU. Exits non-zero when a test fails or the demo's two top-1 differ by more than 0.5 points; a
# bench ratio below 1.0 is reported, not failed.
#
#   tools/cuda_check.sh [test filter]   a filter runs those tests only (no demo, no bench)
#   BUILD=DIR        the build (default build/release_cuda); NO_BUILD=1 uses the binaries already
#                    in DIR (built elsewhere, e.g. with ARCH=-march=x86-64-v3)
#   JOBS=N           make -jN (default: the cores)
#   SANITIZE=0 DEMO=0 BENCH=0   leave a stage out (to run the stages as separate commands)
#   MODELS=a,b PRECISIONS=fp32,tf32,bf16 ITERS=N (10) REPEATS=N (1): the bench; each side's best
#                    of REPEATS medians of ITERS steps counts
#   PYTHON=python3   the reference's interpreter (default: bench/venv's if its torch sees the GPU,
#                    else python3's, else torch and timm from PyPI installed into bench/venv)
set -u
cd "$(dirname "$0")/.." || exit 1

build=${BUILD:-build/release_cuda}
bin=$build/test_cuda
emu=$build/test_cuda_emu
MODELS=${MODELS:-deit_t,agent_deit_t,agent_swin_t,flatten_swin_t,agent_cswin_t}
PRECISIONS=${PRECISIONS:-fp32,tf32,bf16}
ITERS=${ITERS:-10}
REPEATS=${REPEATS:-1}
VENV=${VENV:-bench/venv}
doc=docs/cuda.md
log=$(mktemp -d) || exit 1
trap 'rm -rf "$log"' EXIT
rc=0

# NCCL_HOME for the Makefile when NCCL is neither in CUDA's folders nor the system's: the
# nvidia-nccl wheel's folder (include/, lib/) of an interpreter that has one
find_nccl() {
    local cuda=${CUDA_HOME:-/usr/local/cuda} py dir
    [ -n "${NCCL_HOME:-}" ] && return
    ls "$cuda"/lib64/libnccl.so.2 /usr/lib/*/libnccl.so.2 >/dev/null 2>&1 && return
    for py in "${PYTHON:-}" "$VENV/bin/python" python3; do
        [ -n "$py" ] || continue
        dir=$("$py" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) || continue
        if [ -f "$dir/lib/libnccl.so.2" ]; then
            echo "cuda_check: NCCL from $dir"
            export NCCL_HOME=$dir
            return
        fi
    done
}

if [ "${NO_BUILD:-0}" != 1 ]; then
    find_nccl
    make CUDA=1 BUILD="$build" -j"${JOBS:-$(nproc)}" "$bin" "$emu" "$build/train" "$build/bench" ||
        { echo "cuda_check: the CUDA=1 build failed"; exit 1; }
fi

# ---- 2. tests ----
echo "== $bin"
"$bin" "$@" 2>&1 | tee "$log/tests"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
# the counts of a test log; a run that ended before its summary line (a CUDA error ends the
# process) says so, with its last error line
counts() {
    local c
    c="$(grep -c '^ok ' "$1") passed, $(grep -c '^FAIL ' "$1") failed, $(grep -c '^SKIP ' "$1") skipped"
    grep -qE '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" ||
        c="$c, then the run ended: $(grep '^error' "$1" | tail -1)"
    echo "$c"
}
on_device=$(counts "$log/tests")

# the device-selection test says whether there is a GPU: without one it shows the refusal
"$bin" cuda_select >"$log/probe" 2>&1
if grep -q 'no CUDA device' "$log/probe"; then
    echo
    echo "cuda_check: no GPU here ($(sed -n 's/^ *message: //p' "$log/probe" | head -1))"
    emulated="not built"
    if [ -x "$emu" ]; then
        echo "== $emu (CPU emulation of CUDA, not a GPU)"
        "$emu" "$@" 2>&1 | tee "$log/emu"
        emu_rc=${PIPESTATUS[0]}
        emulated=$(counts "$log/emu")
        [ "$emu_rc" = 0 ] || { emulated="$emulated, exit $emu_rc"; rc=1; }
    fi
    echo
    echo "cuda_check summary (no GPU: nothing ran on a GPU)"
    echo "  on the device:    $on_device"
    echo "  emulated on CPU:  $emulated"
    echo "  demo, bench:      not run (they need a GPU)"
    if [ "$rc" != 0 ]; then
        echo "  result:           FAILED"
        exit 1
    fi
    echo "  result:           the CUDA code's logic passed on the CPU emulation; not run on a GPU"
    exit 0
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
gpu=${gpu:-a CUDA device}
stamp="$(date -u +%Y-%m-%d), $gpu"

# replaces the lines between `<!-- cuda_check NAME -->` and `<!-- /cuda_check NAME -->` of the doc by
# the file's
doc_block() {
    local name=$1 file=$2 tmp
    tmp=$(mktemp "$doc.XXXXXX") || return 1
    if awk -v open="<!-- cuda_check $name -->" -v shut="<!-- /cuda_check $name -->" -v file="$file" '
        $0 == open { print; while ((getline line < file) > 0) print line; inside = 1; found = 1; next }
        $0 == shut { inside = 0 }
        !inside { print }
        END { exit !found }' "$doc" >"$tmp"; then
        mv "$tmp" "$doc"
    else
        rm -f "$tmp"
        echo "cuda_check: $doc has no block '<!-- cuda_check $name -->': results not written there"
    fi
}

# with a GPU, the no-device path too: hidden GPUs must give the clear refusal, not an abort
hidden=FAILED
if CUDA_VISIBLE_DEVICES='' "$bin" cuda_select >"$log/hidden" 2>&1 && grep -q '^ok   cuda_select' "$log/hidden" &&
    grep -q 'no CUDA device' "$log/hidden"; then
    hidden="ok ($(sed -n 's/^ *message: //p' "$log/hidden"))"
else
    cat "$log/hidden"
    rc=1
fi
# what the emulation cannot see: out-of-bounds device accesses, shared-memory races, barriers
sanitizer="not run"
cs=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
command -v "$cs" >/dev/null || cs=$(command -v compute-sanitizer)
if [ "${SANITIZE:-1}" = 1 ] && [ -n "$cs" ]; then
    sanitizer=""
    for tool in memcheck racecheck synccheck; do
        echo "== compute-sanitizer --tool $tool"
        if "$cs" --tool "$tool" --error-exitcode 9 "$bin" "$@" >"$log/$tool" 2>&1; then
            sanitizer="$sanitizer $tool ok,"
        else
            sanitizer="$sanitizer $tool FAILED,"
            tail -30 "$log/$tool"
            rc=1
        fi
    done
    sanitizer=${sanitizer%,}
    sanitizer=${sanitizer# }
elif [ "${SANITIZE:-1}" = 1 ]; then
    sanitizer="not installed"
fi
{
    echo "$stamp: test_cuda $on_device$([ $# -gt 0 ] && echo " (filter: $*)"); with the GPUs hidden:"
    echo "$hidden; compute-sanitizer: $sanitizer."
    if grep -qE '^(FAIL|SKIP) ' "$log/tests"; then
        echo
        echo '```'
        grep -E '^(FAIL|SKIP) ' "$log/tests"
        echo '```'
    fi
} >"$log/tests.md"
doc_block tests "$log/tests.md"

# ---- 3. demo: one epoch on the GPU and on the CPU ----
demo="not run"
if [ $# = 0 ] && [ "${DEMO:-1}" = 1 ]; then
    demo="FAILED"
    [ -d data/fashion_mnist/val ] || make fmnist
    declare -A top1 img_s
    for dev in cuda cpu; do
        run=cuda_check_demo_$dev
        rm -rf "checkpoints/$run"
        echo "== demo, 1 epoch, --device $dev"
        if "$build/train" --config configs/demo_fmnist.json --set train.epochs=1 --device "$dev" \
            --out checkpoints --set run.name="$run" --quiet; then
            line=$(grep '"type": "epoch"' "checkpoints/$run/metrics.jsonl" | tail -1)
            top1[$dev]=$(sed -n 's/.*"val_top1": \([0-9.]*\).*/\1/p' <<<"$line")
            img_s[$dev]=$(sed -n 's/.*"train_img_s": \([0-9.]*\).*/\1/p' <<<"$line")
        fi
    done
    if [ -n "${top1[cuda]:-}" ] && [ -n "${top1[cpu]:-}" ]; then
        diff=$(awk -v a="${top1[cuda]}" -v b="${top1[cpu]}" 'BEGIN { d = a - b; printf "%.2f", d < 0 ? -d : d }')
        verdict=$(awk -v d="$diff" 'BEGIN { print d <= 0.5 ? "within 0.5 points" : "MORE than 0.5 points apart" }')
        demo="top-1 ${top1[cuda]}% on the GPU, ${top1[cpu]}% on the CPU: $diff points, $verdict"
        awk -v d="$diff" 'BEGIN { exit !(d <= 0.5) }' || rc=1
        {
            echo "$stamp: configs/demo_fmnist.json, one epoch (\`--set train.epochs=1\`), the same seed."
            echo
            echo "| device | val top-1 | train img/s |"
            echo "| --- | --- | --- |"
            echo "| cuda | ${top1[cuda]}% | ${img_s[cuda]} |"
            echo "| cpu | ${top1[cpu]}% | ${img_s[cpu]} |"
            echo
            echo "Difference $diff points: $verdict."
        } >"$log/demo.md"
        doc_block demo "$log/demo.md"
    else
        rc=1
    fi
fi

# ---- 4. bench: vitc against PyTorch eager on the GPU ----
cuda_torch() { "$1" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; }
reference_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    local py
    for py in "$VENV/bin/python" python3; do
        command -v "$py" >/dev/null && cuda_torch "$py" && { echo "$py"; return; }
    done
    echo "installing the current torch and timm from PyPI into $VENV (once; about 5 GB)" >&2
    python3 -m venv "$VENV" >&2 && "$VENV/bin/python" -m pip install --quiet torch timm >&2 &&
        cuda_torch "$VENV/bin/python" && { echo "$VENV/bin/python"; return; }
    return 1
}
# prints the command's JSON line, or "error: " and the last line of its stderr
measure() {
    local out
    if out=$("$@" 2>"$log/err"); then echo "$out"; else echo "error: $(tail -1 "$log/err")"; fi
}
bench="not run"
if [ $# = 0 ] && [ "${BENCH:-1}" = 1 ]; then
    if ! PY=$(reference_python); then
        bench="FAILED: no PyTorch that sees the GPU (PYTHON=..., or PyPI for bench/venv)"
        rc=1
    else
        [[ $PY == /* || $PY != */* ]] || PY=$PWD/$PY # the reference runs from tools/ref
        mkdir -p bench
        rows=()
        for precision in ${PRECISIONS//,/ }; do
            for model in ${MODELS//,/ }; do
                cfg=$("$build/bench" --print-model --model "$model")
                vs=() ts=()
                for ((rep = 0; rep < REPEATS; rep++)); do # vitc and PyTorch in turn, each side's best kept
                    echo "== bench $model $precision: vitc, PyTorch"
                    vs+=("$(measure "$build/bench" --device cuda --model "$model" --mode train --batch 128 \
                        --iters "$ITERS" --precision "$precision")")
                    ts+=("$(cd tools/ref && measure "$PY" bench_torch.py "$cfg" train 128 "$ITERS" "$(nproc)" \
                        "$precision" cuda)")
                done
                rows+=("$("$PY" - "$model" "$precision" "${vs[@]}" "${ts[@]}" <<'PY'
import json, sys
model, precision, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
half = len(runs) // 2
def best(side):
    ok = [json.loads(r) for r in side if not r.startswith("error")]
    return max(ok, key=lambda r: r["img_s"]) if ok else {"error": side[-1][len("error: "):]}
v, t = best(runs[:half]), best(runs[half:])
row = {"model": model, "precision": precision, "batch": 128, "vitc_img_s": v.get("img_s"),
       "torch_img_s": t.get("img_s"), "reference": t.get("reference"), "torch_version": t.get("torch_version"),
       "gpu": t.get("gpu")}
if v.get("img_s") and t.get("img_s"):
    row["ratio"] = round(v["img_s"] / t["img_s"], 3)
for side, r in (("vitc", v), ("torch", t)):
    if "error" in r:
        row[side + "_error"] = r["error"]
print(json.dumps(row))
PY
)")
            done
        done
        printf '%s\n' "${rows[@]}" >bench/cuda.json
        "$PY" - bench/cuda.json "$stamp" >"$log/bench.md" <<'PY'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
version = next((r["torch_version"] for r in rows if r.get("torch_version")), "?")
print(f"{sys.argv[2]}: the training step (forward, backward, AdamW) at batch 128, img/s, each the median "
      f"of the timed steps after two warm-ups; PyTorch {version} eager. tf32: TF32 tensor cores for the "
      "products (torch.backends.cuda.matmul.allow_tf32); bf16: products in bf16 (torch.autocast).")
print()
print("| model | precision | vitc img/s | PyTorch img/s | vitc / PyTorch | PyTorch model |")
print("| --- | --- | --- | --- | --- | --- |")
fmt = lambda x: f"{x:.0f}" if x else "—"
for r in rows:
    ratio = f"{r['ratio']:.2f}" + ("" if r["ratio"] >= 1.0 else " (below 1.0)") if "ratio" in r else "—"
    print(f"| {r['model']} | {r['precision']} | {fmt(r['vitc_img_s'])} | {fmt(r['torch_img_s'])} | {ratio} | "
          f"{r.get('reference') or '—'} |")
errors = [(r, side) for r in rows for side in ("vitc", "torch") if side + "_error" in r]
if errors:
    print()
    for r, side in errors:
        print(f"- {r['model']} {r['precision']}, {side}: {r[side + '_error']}")
means = []
for p in dict.fromkeys(r["precision"] for r in rows):
    ratios = [r["ratio"] for r in rows if r["precision"] == p and "ratio" in r]
    if ratios:
        means.append(f"{p} {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}")
if means:
    print()
    print("Geometric mean of vitc / PyTorch: " + ", ".join(means) + ".")
PY
        cat "$log/bench.md"
        doc_block bench "$log/bench.md"
        bench="bench/cuda.json ($(grep -c . bench/cuda.json) rows; table in $doc)"
        grep -q '_error' bench/cuda.json && { bench="$bench, with errors"; rc=1; }
    fi
fi

echo
echo "cuda_check summary ($gpu)"
echo "  on the GPU:       $on_device"
echo "  GPUs hidden:      $hidden"
echo "  sanitizer:        $sanitizer"
echo "  demo:             $demo"
echo "  bench:            $bench"
if [ "$rc" != 0 ]; then
    echo "  result:           FAILED"
    exit 1
fi
echo "  result:           passed (results written into $doc)"

#!/usr/bin/env bash
# make bench-dist: data-parallel training on this machine, 1 rank x THREADS threads against THREADS
# ranks x 1 thread (mpirun), each model's training step at the global batch 16, the two in turn
# REPEATS times (default 2) and each side's fastest kept. Prints img/s, their ratio, the time per step
# spent waiting for the gradient allreduce, the time that allreduce takes alone, and the share of it
# the overlap with the backward hid; writes bench/dist.json (the inputs of docs/distributed.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-deit_t,agent_swin_t,agent_cswin_t}
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-2}
BATCH=${BATCH:-16}
command -v mpirun >/dev/null || { echo "error: make bench-dist needs mpirun (apt-get install openmpi-bin)"; exit 1; }
# as root OpenMPI asks for both; more ranks than cores is allowed for the comparison
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench=build/release/bench
field() { sed -E "s/.*\"$1\": ([0-9.e+-]+).*/\\1/" <<<"$2"; }
faster() { if [ -z "$1" ] || awk "BEGIN{exit !($(field img_s "$2") > $(field img_s "$1"))}"; then echo "$2"; else echo "$1"; fi; }
mkdir -p bench
out=bench/dist.json
echo "[" >"$out"
sep=""
printf "%-14s %12s %12s %6s %10s %10s %7s\n" model "1x${THREADS}_img/s" "${THREADS}x1_img/s" ratio wait_ms alone_ms hidden
for model in ${MODELS//,/ }; do
    one="" many=""
    for ((rep = 0; rep < REPEATS; rep++)); do
        one=$(faster "$one" "$($bench --model "$model" --mode train --batch "$BATCH" --iters "$ITERS" --threads "$THREADS")")
        many=$(faster "$many" "$(mpirun --oversubscribe --bind-to none -np "$THREADS" $bench --model "$model" --mode train \
            --batch "$BATCH" --iters "$ITERS" --threads 1)")
    done
    read -r ratio wait_ms alone_ms hidden < <(awk -v a="$(field img_s "$one")" -v b="$(field img_s "$many")" \
        -v w="$(field allreduce_wait_s "$many")" -v c="$(field allreduce_alone_s "$many")" \
        'BEGIN { h = c > 0 ? 1 - w / c : 0; if (h < 0) h = 0; printf "%.2f %.1f %.1f %.0f%%\n", b / a, 1000 * w, 1000 * c, 100 * h }')
    printf "%-14s %12.2f %12.2f %6s %10s %10s %7s\n" "$model" "$(field img_s "$one")" "$(field img_s "$many")" \
        "$ratio" "$wait_ms" "$alone_ms" "$hidden"
    printf '%s{"one_rank": %s, "ranks": %s, "ratio": %s}\n' "$sep" "$one" "$many" "$ratio" >>"$out"
    sep=","
done
echo "]" >>"$out"
echo "wrote $out"

# The projection of docs/distributed.md from these measurements: a ring allreduce of the gradient
# block per optimizer step costs 2(N-1)/N x bytes / bandwidth plus 2(N-1) latencies per bucket (as
# train sizes them: an eighth of the block, within 1 and 25 MB); each
# node trains LOCAL_BATCH images per step at the measured 1-rank time per image (this machine, and a
# node FAST times faster); no overlap is credited. Efficiency = compute / (compute + allreduce).
LOCAL_BATCH=${LOCAL_BATCH:-128}
LATENCY_US=${LATENCY_US:-20}
FAST=${FAST:-32}
proj=bench/dist_projection.md
{
    echo "Inputs: ring allreduce, buckets as train's (bytes/8 within 1-25 MB), latency ${LATENCY_US} us per message, LOCAL_BATCH=$LOCAL_BATCH images per node and step, no overlap credited."
    echo
    echo "| model | grad MB | s/img (1 rank) | node | step compute s | 8 nodes 25/100/400 Gb/s | 64 nodes 25/100/400 Gb/s | 256 nodes 25/100/400 Gb/s |"
    echo "|---|---|---|---|---|---|---|---|"
    for model in ${MODELS//,/ }; do
        line=$(grep "\"model\": \"$model\"" "$out")
        one=$(sed -E 's/.*"one_rank": \{[^}]*"img_s": ([0-9.e+-]+).*/\1/' <<<"$line")
        bytes=$(field grad_bytes "$line")
        for speed in 1 "$FAST"; do
            awk -v m="$model" -v img_s="$one" -v bytes="$bytes" -v b="$LOCAL_BATCH" -v lat="$LATENCY_US" -v f="$speed" 'BEGIN {
                tc = b / img_s / f
                bucket = bytes / 8; if (bucket > 25 * 2^20) bucket = 25 * 2^20; if (bucket < 2^20) bucket = 2^20
                buckets = int((bytes + bucket - 1) / bucket)
                printf "| %s | %.1f | %.4f | %s | %.2f |", m, bytes / 1e6, 1 / img_s, f == 1 ? "this machine" : f "x faster", tc
                split("8 64 256", ns, " "); split("25 100 400", bws, " ")
                for (i = 1; i <= 3; i++) {
                    n = ns[i]; cell = ""
                    for (j = 1; j <= 3; j++) {
                        tcomm = 2 * (n - 1) / n * bytes * 8 / (bws[j] * 1e9) + 2 * (n - 1) * buckets * lat * 1e-6
                        cell = cell sprintf("%s%.0f%%", j > 1 ? " / " : " ", 100 * tc / (tc + tcomm))
                    }
                    printf "%s |", cell
                }
                printf "\n"
            }'
        done
    done
} >"$proj"
cat "$proj"
echo "wrote $proj"

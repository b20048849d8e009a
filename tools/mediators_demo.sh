#!/usr/bin/env bash
# make demo-mediators: the Attention Mediators demo of docs/mediators.md on Fashion-MNIST. Trains the
# class-conditional pixel-space SiT of configs/demo_sit_fmnist.json four times, the same way, with
# vanilla softmax attention and with n = 4, 16 and 64 mediators; samples each (EMA weights, SDE,
# guidance) and judges the samples with the demo's vitc classifier (make demo's run: the share given
# their class, and the Frechet distance of its features to the 10k real test images); then the
# time-step-wise schedule over the three mediator networks, and the JSD redundancy of the vanilla
# model's attention against the time step. Results in docs/mediators/ (grids, CSV, plot, log).
# Rerunning skips trained models. Environment: EPOCHS and LR (default: the config's, 3 epochs of a
# cosine from 1e-3 at batch 32), PRECISION (bf16 where the CPU has AVX512_BF16, else fp32),
# PER_CLASS samples (30), STEPS (50), CFG (2), RATIOS of the schedule (0.5,0.3), CLF
# (checkpoints/demo_fmnist/last.safetensors), OUT (docs/mediators), RUNS (checkpoints), TRAIN_ARGS
# (more train flags, e.g. --set run.stop_after_steps=3 for a dry run).
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${EPOCHS:-$(sed -n 's/.*"epochs": *\([0-9]*\).*/\1/p' configs/demo_sit_fmnist.json)}
lr_args=() && [ -n "${LR:-}" ] && lr_args=(--set train.lr="$LR" --set train.warmup_lr="$LR")
per_class=${PER_CLASS:-30} steps=${STEPS:-50} cfg=${CFG:-2}
ratios=${RATIOS:-0.5,0.3} clf=${CLF:-checkpoints/demo_fmnist/last.safetensors} out=${OUT:-docs/mediators}
runs=${RUNS:-checkpoints}
if [ -z "${PRECISION:-}" ]; then
    PRECISION=fp32
    build/release/bench --precision bf16 --sgemm 8,8,8 --iters 1 >/dev/null 2>&1 && PRECISION=bf16
fi
[ -f "$clf" ] || { echo "error: $clf: no classifier to judge with (run make demo first)"; exit 1; }
mkdir -p "$out"
log="$out/demo.log"

main() {
    : > "$log"
    say() { echo "$@" | tee -a "$log"; }
    say "Attention Mediators demo: $(date -u +%F), $epochs epoch(s) at lr ${LR:-of the config}, $PRECISION, $per_class samples a class," \
        "$steps SDE steps, cfg $cfg"
    for n in 0 4 16 64; do
        name=sit_fmnist_med$n attn=mediator
        [ "$n" = 0 ] && name=sit_fmnist_vanilla attn=native
        if [ ! -f "$runs/$name/last.safetensors" ] || ! grep -q "\"type\": \"end\", \"epochs\": $epochs," "$runs/$name/metrics.jsonl"; then
            start=$(date +%s)
            ./train --config configs/demo_sit_fmnist.json --out "$runs" --set run.name=$name \
                --set model.attn=$attn --set model.mediator_num=$((n ? n : 16)) --set train.epochs="$epochs" \
                "${lr_args[@]}" --precision "$PRECISION" --quiet --overwrite ${TRAIN_ARGS:-}
            say "$name: trained in $(( ($(date +%s) - start) / 60 )) min"
        fi
        ./train --config configs/demo_sit_fmnist.json --set model.attn=$attn --set model.mediator_num=$((n ? n : 16)) \
            --summary | grep -E "^(parameters|MACs per image)" | sed "s/^/$name: /" | tee -a "$log"
        start=$(date +%s%N)
        ./sample --ckpt "$runs/$name/last.safetensors" --ema --out "$out/$name.png" --n "$per_class" \
            --steps "$steps" --cfg "$cfg" --judge "$clf" | sed "s/^/$name: /" | tee -a "$log"
        say "$name: sampled in $(( ($(date +%s%N) - start) / 1000000 )) ms"
    done
    start=$(date +%s%N)
    ./sample --ckpts $runs/sit_fmnist_med4/last.safetensors,$runs/sit_fmnist_med16/last.safetensors,$runs/sit_fmnist_med64/last.safetensors \
        --switch-ratios "$ratios" --ema --out "$out/schedule.png" --n "$per_class" --steps "$steps" --cfg "$cfg" \
        --judge "$clf" | sed "s/^/schedule 4-16-64 | /" | tee -a "$log"
    say "schedule 4-16-64 | sampled in $(( ($(date +%s%N) - start) / 1000000 )) ms"
    ./sample --ckpt $runs/sit_fmnist_vanilla/last.safetensors --ema --out "$out/jsd_samples.png" --n 4 \
        --steps "$steps" --jsd "$out/jsd_vanilla.csv" | tee -a "$log"
    tools/plot.sh --jsd "$out/jsd_vanilla.csv" --out "$out/redundancy" | tee -a "$log"
}
main "$@"

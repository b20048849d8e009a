#!/usr/bin/env bash
# The study of docs/ablations.md on Fashion-MNIST: six sweeps of tools/sweep.sh (3 seeds each) under
# sweeps/, then their plots and attention maps under docs/ablations/ and their tables into
# docs/ablations.md. Rerunning skips finished runs.
# Environment: SEEDS (default 1,2,3), JOBS (default 2), TRAIN (default ./train), OUT (default sweeps).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-1,2,3} jobs=${JOBS:-2} out=${OUT:-sweeps}
deit=configs/ablation/deit_fmnist.json swin=configs/ablation/swin_fmnist.json
sweep() { tools/sweep.sh --seeds "$seeds" -j "$jobs" --train "${TRAIN:-./train}" "$@"; }

# all in one function, so that bash has read the whole script before it runs a step of it (edits
# while a study runs do not derail it)
main() {
    # 1-2: the four attentions in a DeiT-style (global, class token) and a Swin-style (two stages) model
    sweep --config $deit --out "$out/deit_attn" --grid model.attn=native,agent,flatten,elfatt
    sweep --config $swin --out "$out/swin_attn" --grid model.attn=native,agent,flatten,elfatt
    # 3: Agent attention without its position biases, without its depthwise conv (DeiT-style)
    sweep --config $deit --out "$out/agent_parts" --set model.attn=agent --grid model.agent_bias=false
    sweep --config $deit --out "$out/agent_parts" --set model.attn=agent --grid model.dwc=false
    # 4: agent tokens (2x2 and 4x4 pooled agents; 3x3 is the deit_attn run)
    sweep --config $deit --out "$out/agent_num" --set model.attn=agent --grid model.agent_num=4,16
    # 5: FLatten's focusing factor p (3 is the deit_attn run) and its depthwise conv
    sweep --config $deit --out "$out/flatten_parts" --set model.attn=flatten --grid model.focusing_factor=1,5
    sweep --config $deit --out "$out/flatten_parts" --set model.attn=flatten --grid model.dwc=false
    # 6: receptive field in the Swin-style model: native windows of 4 vs global (window = map), and the
    #    linear attentions restricted to 8x8 windows in stage 1 instead of the whole map
    sweep --config $swin --out "$out/window" --set model.attn=native --grid 'model.window=[4,4],[16,8]'
    sweep --config $swin --out "$out/window" --grid model.attn=agent,flatten --grid 'model.attn_window=[8,0]'

    tools/plot.sh --sweep "$out/deit_attn" --sweep "$out/swin_attn" --out docs/ablations/attn
    for s in agent_parts agent_num flatten_parts window; do tools/plot.sh --sweep "$out/$s" --out "docs/ablations/$s"; done

    # attention of the centre patch of one validation image in the last block, seed-1 models
    local images=(data/fashion_mnist/val/9_ankle_boot/*)
    local image=${images[0]}
    for arch in deit swin; do
        for a in native agent flatten elfatt; do
            ./eval --ckpt "$out/${arch}_attn/runs/attn=${a}_seed=1/last.safetensors" --image "$image" \
                --attn-map "docs/ablations/map_${arch}_$a.png" | grep '^attention map'
        done
    done
    tools/doc_tables.sh docs/ablations.md
}
main

"""Writes tests/fixtures/train_parity.safetensors: 20 training steps of the tiny Agent-DeiT
(configs/tiny/deit_agent.json) in PyTorch float64 with AdamW (the official no-weight-decay rule),
timm's per-step cosine schedule with warm-up, gradient clipping, label smoothing and EMA — the
initial weights, every batch, the loss of every step and the final weights and EMA weights."""
import json
import math
import sys

import torch
import torch.nn.functional as F

import st_io
from deit import DeiT

STEPS, BATCH = 20, 2
BASE_LR, WARMUP_LR, MIN_LR, WARMUP = 1e-3, 1e-6, 1e-5, 5
WD, CLIP, SMOOTHING, EMA_DECAY = 0.05, 5.0, 0.1, 0.9


def lr_at(t):  # timm CosineLRScheduler(t_initial=STEPS, warmup_t=WARMUP, cycle_limit=1), per step
    if t < WARMUP:
        return WARMUP_LR + t * (BASE_LR - WARMUP_LR) / WARMUP
    return MIN_LR + 0.5 * (BASE_LR - MIN_LR) * (1 + math.cos(math.pi * t / STEPS))


def decays(name, p):
    skip = ("pos_embed", "cls_token", "relative_position_bias_table", "absolute_pos_embed")
    return p.ndim > 1 and not name.endswith(".bias") and not name.endswith(skip)


def main(out):
    with open("configs/tiny/deit_agent.json") as f:
        full = json.load(f)
    cfg = full["model"]
    torch.manual_seed(1)
    model = DeiT(cfg).double()
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    img, chans, K = cfg["img_size"], cfg.get("in_chans", 3), cfg["num_classes"]
    images = torch.randn(STEPS, BATCH, img, img, chans, dtype=torch.float64)
    labels = torch.randint(0, K, (STEPS, BATCH))
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if decays(n, p)], "weight_decay": WD},
              {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=BASE_LR, betas=(0.9, 0.999), eps=1e-8)
    ema = {n: p.detach().clone() for n, p in named}
    losses = []
    for step in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad()
        loss = F.cross_entropy(model(images[step]), labels[step], label_smoothing=SMOOTHING)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        with torch.no_grad():
            for n, p in named:
                ema[n].mul_(EMA_DECAY).add_(p.detach(), alpha=1 - EMA_DECAY)
        losses.append(loss.item())
    tensors = {"images": images, "labels": labels.double(), "losses": torch.tensor(losses)}
    for n, p in named:
        tensors["init/" + n] = init[n]
        tensors["final/" + n] = p.detach()
        tensors["ema/" + n] = ema[n]
    meta = {"config": json.dumps(full), "steps": STEPS, "batch": BATCH, "base_lr": BASE_LR,
            "warmup_lr": WARMUP_LR, "min_lr": MIN_LR, "warmup_steps": WARMUP, "weight_decay": WD,
            "clip": CLIP, "smoothing": SMOOTHING, "ema_decay": EMA_DECAY, "torch": torch.__version__}
    st_io.save(out, {k: v.numpy() for k, v in tensors.items()}, meta)
    print(f"wrote {out}: losses {losses[0]:.5f} -> {losses[-1]:.5f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/train_parity.safetensors")

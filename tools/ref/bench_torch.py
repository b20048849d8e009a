"""PyTorch side of tools/bench.sh and tools/cuda_check.sh: the model of a resolved vitc model section
(JSON on argv[1]) timed like tools/bench.c — synthetic input, warm-up then the median of several
runs of a training step (forward, backward, AdamW) or of inference — in fp32, with bf16 autocast, or
on CUDA in TF32 (argv[6]), eager, on the CPU or on CUDA (argv[7]). On CUDA, fp32 and bf16 keep
TF32 off (matmul and cuDNN), tf32 turns both on, and each timed run ends with a synchronize.

The reference is what a user would run instead: timm's own model where timm has the architecture
(its attention goes through torch's fused scaled_dot_product_attention), else the reference module
of tools/ref. Prints one JSON line naming which, and the versions."""
import json
import resource
import sys
import time

import torch
import torch.nn.functional as F

from cswin import CSwin
from deit import DeiT
from pvt import PVT
from swin import Swin

BUILDERS = {"deit": DeiT, "swin": Swin, "pvt": PVT, "pvt_v2": PVT, "cswin": CSwin}
# vitc model -> timm model of the same architecture (native attention, the official sizes)
TIMM_NAMES = {"deit_t": "deit_tiny_patch16_224", "deit_s": "deit_small_patch16_224",
              "deit_b": "deit_base_patch16_224", "swin_t": "swin_tiny_patch4_window7_224",
              "swin_s": "swin_small_patch4_window7_224", "swin_b": "swin_base_patch4_window7_224",
              **{f"pvt_v2_b{i}": f"pvt_v2_b{i}" for i in range(6)}}


def timm_model(cfg):
    """timm's model for cfg, or None where timm is missing or lacks the architecture"""
    name = TIMM_NAMES.get(cfg["name"])
    if name is None or int(torch.__version__.split(".")[0]) < 2:
        return None, None
    try:
        import timm
    except ImportError:
        return None, None
    model = timm.create_model(name, pretrained=False, num_classes=cfg["num_classes"],
                              drop_path_rate=cfg.get("drop_path", 0.0), img_size=cfg["img_size"])
    return model, f"timm {timm.__version__} {name}"


def main():
    cfg = json.loads(sys.argv[1])
    mode, batch, iters, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    precision = sys.argv[6] if len(sys.argv) > 6 else "fp32"
    device = sys.argv[7] if len(sys.argv) > 7 else "cpu"
    if precision not in ("fp32", "bf16", "tf32") or (precision == "tf32" and device != "cuda"):
        sys.exit(f"bench_torch.py: precision {precision} on {device}: expected fp32, bf16 or (on cuda) tf32")
    torch.set_num_threads(threads)
    cuda = device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    model, reference = timm_model(cfg)
    if model is None:
        model, reference = BUILDERS[cfg["arch"]](cfg), f"tools/ref {cfg['arch']}"
        x = torch.randn(batch, cfg["img_size"], cfg["img_size"], cfg.get("in_chans", 3))
    else:
        x = torch.randn(batch, cfg.get("in_chans", 3), cfg["img_size"], cfg["img_size"])
    y = torch.zeros(batch, dtype=torch.long)
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16")
    times = []
    for it in range(iters + 2):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if mode == "train":
            model.train()
            opt.zero_grad()
            with autocast:
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            loss.backward()
            opt.step()
        else:
            model.eval()
            with torch.no_grad(), autocast:
                model(x)
        if cuda:
            torch.cuda.synchronize()
        if it >= 2:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out = {"median_s": med, "img_s": batch / med, "peak_rss_mib": rss, "precision": precision,
           "reference": reference, "torch_version": torch.__version__, "device": device,
           "backend": torch.__config__.parallel_info().split("\n")[0]}
    if cuda:
        out["gpu"] = torch.cuda.get_device_name()
        out["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""PyTorch side of tools/bench.sh: the reference model of a resolved vitc model section (JSON on
argv[1]) timed like tools/bench.c — fp32, synthetic input, warm-up then the median of several runs
of a training step (forward, backward, AdamW) or of inference. Prints one JSON line."""
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


def main():
    cfg = json.loads(sys.argv[1])
    mode, batch, iters, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    model = BUILDERS[cfg["arch"]](cfg)
    x = torch.randn(batch, cfg["img_size"], cfg["img_size"], cfg.get("in_chans", 3))
    y = torch.zeros(batch, dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    times = []
    for it in range(iters + 2):
        t0 = time.perf_counter()
        if mode == "train":
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
            opt.step()
        else:
            model.eval()
            with torch.no_grad():
                model(x)
        if it >= 2:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"median_s": med, "img_s": batch / med, "peak_rss_mib": rss,
                      "torch_version": torch.__version__, "backend": torch.__config__.parallel_info().split("\n")[0]}))


if __name__ == "__main__":
    main()

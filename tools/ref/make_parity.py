"""Writes the parity fixtures of tests/test_parity.c: for every tiny config with a reference model,
random weights, an input batch, labels, and the float64 reference's logits, loss and every parameter
gradient after one forward/backward. Run by `make parity` (needs torch)."""
import glob
import json
import os
import sys

import torch
import torch.nn.functional as F

import official_pth
import dit
import sit
import st_io
from cswin import CSwin
from deit import DeiT
from pvt import PVT
from swin import Swin

BUILDERS = {"deit": DeiT, "swin": Swin, "pvt": PVT, "pvt_v2": PVT, "cswin": CSwin}
BATCH = 2


def build(cfg):
    arch = cfg["arch"]
    if arch not in BUILDERS:
        return None
    return BUILDERS[arch](cfg)


def main(config_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    made = 0
    for path in sorted(glob.glob(os.path.join(config_dir, "*.json"))):
        with open(path) as f:
            full = json.load(f)
        cfg = full["model"]
        name = os.path.splitext(os.path.basename(path))[0]
        torch.manual_seed(0)
        model = build(cfg)
        if model is None:
            print(f"skip {name}: no reference for arch {cfg['arch']}")
            continue
        model = model.double()
        with torch.no_grad():  # move every tensor off its init value so each one is exercised
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        img, chans = cfg["img_size"], cfg.get("in_chans", 3)
        x = torch.randn(BATCH, img, img, chans, dtype=torch.float64)
        labels = torch.randint(0, cfg["num_classes"], (BATCH,))
        logits = model(x)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        tensors = {"input": x, "labels": labels.double(), "logits": logits.detach(),
                   "loss": loss.detach().reshape(1)}
        for pname, p in model.named_parameters():
            tensors["param/" + pname] = p.detach()
            # a parameter the forward never uses (FLatten-PVT's norm) has no gradient: zero
            tensors["grad/" + pname] = p.grad if p.grad is not None else torch.zeros_like(p)
        out = os.path.join(out_dir, name + ".safetensors")
        st_io.save(out, {k: v.numpy() for k, v in tensors.items()},
                   {"config": json.dumps(full), "torch": torch.__version__})
        print(f"wrote {out}: {sum(p.numel() for p in model.parameters())} params, "
              f"loss {loss.item():.6f}")
        made += 1
    print(f"{made} fixtures")
    convert_fixture(config_dir, out_dir)
    sit.make_fixtures(config_dir, os.path.join(os.path.dirname(out_dir), "sit"))
    dit.make_fixture(os.path.join(config_dir, "sit_mediator.json"), os.path.join(os.path.dirname(out_dir), "sit"))


def convert_fixture(config_dir, out_dir):
    """A .pth of the tiny Agent-Swin (official key names, with its index buffers) through
    tools/convert_pth.py, plus the PyTorch logits of a fixed input for the C side to match."""
    import subprocess
    import tempfile
    path = os.path.join(config_dir, "swin_agent.json")
    with open(path) as f:
        cfg = json.load(f)["model"]
    torch.manual_seed(5)
    model = Swin(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(2, cfg["img_size"], cfg["img_size"], cfg.get("in_chans", 3))
    with torch.no_grad():
        logits = model(x)
    out = os.path.join(os.path.dirname(out_dir), "converted_swin_agent.safetensors")
    with tempfile.TemporaryDirectory() as tmp:
        pth = os.path.join(tmp, "swin_agent.pth")
        torch.save({"model": model.state_dict(), "epoch": 3}, pth)
        subprocess.run([sys.executable, "tools/convert_pth.py", pth, out, "--config", path], check=True)
    official_pth.save(model.state_dict(), os.path.dirname(out_dir))
    st_io.save(out.replace(".safetensors", "_logits.safetensors"), {"input": x.numpy(), "logits": logits.numpy()})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "configs/tiny",
         sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/parity")

#!/usr/bin/env python3
"""Converts a PyTorch checkpoint with the official key names (an Agent-Attention / FLatten / Swin /
PVT / CSwin / DeiT release, or a state_dict saved from tools/ref) into a .safetensors file that
`eval --ckpt` loads: float32 tensors under the same names, buffers vitc recomputes dropped
(relative_position_index, attn_mask), and the model config in the header.

    tools/convert_pth.py agent_swin_t.pth agent_swin_t.safetensors --model agent_swin_t
    tools/convert_pth.py cswin.pth out.safetensors --model agent_cswin_t --ema
    tools/convert_pth.py my.pth out.safetensors --config configs/tiny/swin_agent.json
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
import st_io  # noqa: E402

BUFFERS = ("relative_position_index", "attn_mask", "relative_coords_table")


def state_dict_of(obj, ema):
    if isinstance(obj, dict) and ema:
        if "state_dict_ema" not in obj:
            sys.exit("error: --ema given but the checkpoint has no 'state_dict_ema'")
        return obj["state_dict_ema"]
    if isinstance(obj, dict):
        for key in ("model", "state_dict"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
    return obj


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pth")
    ap.add_argument("out")
    ap.add_argument("--model", help="a vitc registry name (e.g. agent_swin_t)")
    ap.add_argument("--config", help="a vitc config JSON whose model section describes the network")
    ap.add_argument("--ema", action="store_true", help="convert the EMA weights (state_dict_ema)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra model keys, e.g. --set num_classes=10")
    args = ap.parse_args()
    if not args.model and not args.config:
        ap.error("give --model NAME or --config FILE")
    obj = torch.load(args.pth, map_location="cpu")
    sd = state_dict_of(obj, args.ema)
    if not isinstance(sd, dict):
        sys.exit(f"error: {args.pth} holds no state_dict")
    tensors = {}
    for name, value in sd.items():
        name = name[len("module."):] if name.startswith("module.") else name
        if name.endswith(BUFFERS) or not torch.is_tensor(value):
            continue
        tensors[name] = value.detach().float().numpy()
    model = {}
    if args.config:
        with open(args.config) as f:
            model = json.load(f)["model"]
    if args.model:
        model["name"] = args.model
    if "head.weight" in tensors and "num_classes" not in model:
        model["num_classes"] = int(tensors["head.weight"].shape[0])
    for kv in args.set:
        key, _, value = kv.partition("=")
        try:
            model[key] = json.loads(value)
        except json.JSONDecodeError:
            model[key] = value
    st_io.save(args.out, tensors, {"format": "vitc-checkpoint-1", "config": json.dumps({"model": model}),
                                   "source": os.path.basename(args.pth)})
    print(f"wrote {args.out}: {len(tensors)} tensors, model {json.dumps(model)}")


if __name__ == "__main__":
    main()

"""Checkpoints as the official repos write them, for tests/test_convert_pth.c: their save_checkpoint
pickles the weights beside the optimizer state, the epoch and the run's yacs config (an object of a
class the reader cannot import). Written in torch.save's zip format and in its legacy format, with a
transposed view (strides, offset), a float16 and a bfloat16 tensor next to the model's weights."""
import os
import sys
import tempfile

import torch

# the config's class lives in a module that exists only while saving
CONFIG_MODULE = '''
class CfgNode(dict):
    """stands for yacs.config.CfgNode"""
'''


def extra_tensors():
    """the tensors besides the model's, and what the converter must make of them (float32, row-major)"""
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    view = base[1:, 1:4].t()  # shape (3, 3), strides (1, 5), offset 6
    return {"check.strided": view, "check.half": torch.tensor([0.5, -1.25, 3.0, 65504.0], dtype=torch.float16),
            "check.bfloat16": torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)}


def save(state_dict, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "official_config.py"), "w") as f:
            f.write(CONFIG_MODULE)
        sys.path.insert(0, tmp)
        import official_config
        cfg = official_config.CfgNode(MODEL={"TYPE": "agent_swin"}, TRAIN={"EPOCHS": 300})
        weights = dict(state_dict)
        weights.update(extra_tensors())
        first = next(iter(state_dict.values()))
        checkpoint = {"model": weights, "optimizer": {"state": {0: {"exp_avg": first.clone()}}, "param_groups": []},
                      "lr_scheduler": {"last_epoch": 3}, "max_accuracy": 12.5, "epoch": 3, "config": cfg}
        torch.save(checkpoint, os.path.join(out_dir, "official_swin_agent_zip.pth"))
        torch.save(checkpoint, os.path.join(out_dir, "official_swin_agent_legacy.pth"),
                   _use_new_zipfile_serialization=False)
        sys.path.remove(tmp)
        del sys.modules["official_config"]

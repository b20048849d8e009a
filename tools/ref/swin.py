"""Reference Swin (the Agent-Attention / FLatten repos' skeleton) with per-block attention cores;
parameter names equal the official state_dict keys."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention import AgentCore, ElfattCore, FLattenCore, SoftmaxWindow
from common import block_kinds, per_stage
from deit import Mlp


def window_partition(x, w):
    B, H, W, C = x.shape
    x = x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, w * w, C)


def window_reverse(x, w, H, W):
    B = x.shape[0] // ((H // w) * (W // w))
    x = x.view(B, H // w, W // w, w, w, -1).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, H, W, -1)


def shift_mask(R, w, s):
    img = torch.zeros(1, R, R, 1)
    cnt = 0
    for hs in (slice(0, -w), slice(-w, -s), slice(-s, None)):
        for ws in (slice(0, -w), slice(-w, -s), slice(-s, None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    mw = window_partition(img, w).squeeze(-1)
    m = mw[:, None, :] - mw[:, :, None]
    return m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)


class Attention(nn.Module):
    def __init__(self, dim, heads, kind, w, mask, cfg, stage):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=cfg.get("qkv_bias", True))
        self.proj = nn.Linear(dim, dim)
        if kind == "native":
            self.core = SoftmaxWindow(self, dim, heads, w, mask)
        elif kind == "agent":
            self.core = AgentCore(self, dim, heads, per_stage(cfg, "agent_num", 49)[stage], w, w,
                                  agent_bias=cfg.get("agent_bias", True), dwc=cfg.get("dwc", True))
        elif kind == "flatten":
            self.core = FLattenCore(self, dim, heads, w, w, p=cfg.get("focusing_factor", 3.0),
                                    kernel=cfg.get("dwc_kernel", 5), dwc=cfg.get("dwc", True))
        elif kind == "elfatt":
            self.core = ElfattCore(self, dim, heads, w, w, per_stage(cfg, "block_size", 1)[stage])
        else:
            raise ValueError(kind)

    def forward(self, x):
        q, k, v = self.qkv(x).split(x.shape[-1], dim=-1)
        return self.proj(self.core(q, k, v))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, kind, R, j, cfg, stage):
        super().__init__()
        if kind == "native":
            w = per_stage(cfg, "window", 7)[stage]
        else:
            w = per_stage(cfg, "attn_window", 0)[stage] or R
        s = w // 2 if j % 2 else 0
        if R <= w:
            w, s = R, 0
        self.R, self.w, self.s = R, w, s
        mask = shift_mask(R, w, s) if (kind == "native" and s) else None
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, kind, w, mask, cfg, stage)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        B, L, C = x.shape
        y = self.norm1(x).view(B, self.R, self.R, C)
        if self.s:
            y = torch.roll(y, shifts=(-self.s, -self.s), dims=(1, 2))
        y = window_reverse(self.attn(window_partition(y, self.w)), self.w, self.R, self.R)
        if self.s:
            y = torch.roll(y, shifts=(self.s, self.s), dims=(1, 2))
        x = x + y.reshape(B, L, C)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim, out, conv):
        super().__init__()
        self.conv_merge = conv
        if conv:
            self.conv = nn.Conv2d(dim, out, 3, 2, 1)
            self.norm = nn.LayerNorm(out)
        else:
            self.norm = nn.LayerNorm(4 * dim)
            self.reduction = nn.Linear(4 * dim, out, bias=False)

    def forward(self, x, R):
        B, L, C = x.shape
        x = x.view(B, R, R, C)
        if self.conv_merge:
            y = self.conv(x.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2)
            return self.norm(y)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x.view(B, -1, 4 * C)))


class Stage(nn.Module):
    def __init__(self, cfg, s, R, last):
        super().__init__()
        dim, kinds = cfg["embed_dim"][s], block_kinds(cfg, s)
        ratio = per_stage(cfg, "mlp_ratio", 4)[s]
        self.R = R
        self.blocks = nn.ModuleList(Block(dim, cfg["num_heads"][s], ratio, kinds[j], R, j, cfg, s)
                                    for j in range(cfg["depths"][s]))
        self.downsample = None if last else PatchMerging(dim, cfg["embed_dim"][s + 1],
                                                         cfg.get("merge", "patch") == "conv")

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x if self.downsample is None else self.downsample(x, self.R)


class Swin(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        P, C = cfg.get("patch_size", 4), cfg["embed_dim"][0]
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(cfg.get("in_chans", 3), C, P, stride=P)
        self.patch_embed.norm = nn.LayerNorm(C)
        R, n = cfg["img_size"] // P, len(cfg["depths"])
        stages = []
        for s in range(n):
            stages.append(Stage(cfg, s, R, s == n - 1))
            R //= 2
        self.layers = nn.ModuleList(stages)
        self.norm = nn.LayerNorm(cfg["embed_dim"][-1])
        self.head = nn.Linear(cfg["embed_dim"][-1], cfg["num_classes"])

    def forward(self, images_nhwc):
        x = self.patch_embed.proj(images_nhwc.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2)
        x = self.patch_embed.norm(x)
        for st in self.layers:
            x = st(x)
        return self.head(self.norm(x).mean(dim=1))

"""Reference PVT v1 (the Agent/FLatten repos' skeleton) and PVT v2 with per-block attention cores;
parameter names equal the official state_dict keys."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention import AgentCore, ElfattCore, FLattenCore, SoftmaxGlobal
from common import block_kinds, per_stage


class Attention(nn.Module):
    def __init__(self, dim, heads, kind, R, sr, cfg, stage):
        super().__init__()
        self.q = nn.Linear(dim, dim, bias=cfg.get("qkv_bias", True))
        self.kv = nn.Linear(dim, 2 * dim, bias=cfg.get("qkv_bias", True))
        self.proj = nn.Linear(dim, dim)
        self.sr_ratio, self.R = sr, R
        if sr > 1:
            self.sr = nn.Conv2d(dim, dim, sr, stride=sr)
            self.norm = nn.LayerNorm(dim)
        rk = R // sr
        if kind == "native":
            self.core = SoftmaxGlobal(self, dim, heads)
        elif kind == "agent":
            self.core = AgentCore(self, dim, heads, per_stage(cfg, "agent_num", 49)[stage], R, R, rk, rk,
                                  agent_bias=cfg.get("agent_bias", True), dwc=cfg.get("dwc", True))
        elif kind == "flatten":
            self.core = FLattenCore(self, dim, heads, R, R, p=cfg.get("focusing_factor", 3.0),
                                    kernel=cfg.get("dwc_kernel", 5), dwc=cfg.get("dwc", True), hk=rk, wk=rk)
        elif kind == "elfatt":
            self.core = ElfattCore(self, dim, heads, R, R, per_stage(cfg, "block_size", 1)[stage])
        else:
            raise ValueError(kind)

    def forward(self, x):
        B, N, C = x.shape
        src = x
        if self.sr_ratio > 1:
            img = x.transpose(1, 2).reshape(B, C, self.R, self.R)
            src = self.norm(self.sr(img).flatten(2).transpose(1, 2))
        k, v = self.kv(src).split(C, dim=-1)
        return self.proj(self.core(self.q(x), k, v))


class Mlp(nn.Module):
    def __init__(self, dim, hidden, R, v2):
        super().__init__()
        self.fc1, self.fc2, self.R, self.v2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim), R, v2
        if v2:
            self.dwconv = nn.Module()
            self.dwconv.dwconv = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)

    def forward(self, x):
        x = self.fc1(x)
        if self.v2:
            B, N, C = x.shape
            x = self.dwconv.dwconv(x.transpose(1, 2).reshape(B, C, self.R, self.R)).flatten(2).transpose(1, 2)
        return self.fc2(F.gelu(x))


class Block(nn.Module):
    def __init__(self, dim, heads, ratio, kind, R, sr, v2, cfg, stage):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, kind, R, sr, cfg, stage)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * ratio), R, v2)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PVT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.v2 = cfg["arch"] == "pvt_v2"
        n, R, cin = len(cfg["depths"]), cfg["img_size"], cfg.get("in_chans", 3)
        ratios, srs = per_stage(cfg, "mlp_ratio", 4), per_stage(cfg, "sr_ratio", 1)
        self.res = []
        for s in range(n):
            i, C = s + 1, cfg["embed_dim"][s]
            pe = nn.Module()
            if self.v2:
                k, st = (7, 4) if s == 0 else (3, 2)
                pe.proj = nn.Conv2d(cin, C, k, stride=st, padding=k // 2)
                R = (R + 2 * (k // 2) - k) // st + 1
            else:
                p = cfg.get("patch_size", 4) if s == 0 else 2
                pe.proj = nn.Conv2d(cin, C, p, stride=p)
                R //= p
                setattr(self, f"pos_embed{i}", nn.Parameter(torch.randn(1, R * R, C) * 0.02))
            pe.norm = nn.LayerNorm(C)
            setattr(self, f"patch_embed{i}", pe)
            kinds = block_kinds(cfg, s)
            setattr(self, f"block{i}", nn.ModuleList(
                Block(C, cfg["num_heads"][s], ratios[s], kinds[j], R, srs[s], self.v2, cfg, s)
                for j in range(cfg["depths"][s])))
            if self.v2:
                setattr(self, f"norm{i}", nn.LayerNorm(C, eps=1e-6))
            self.res.append(R)
            cin = C
        if cfg.get("unused_norm", False):
            self.norm = nn.LayerNorm(cfg["embed_dim"][-1], eps=1e-6)  # declared, never applied
        self.head = nn.Linear(cfg["embed_dim"][-1], cfg["num_classes"])
        self.n = n

    def forward(self, images_nhwc):
        x = images_nhwc.permute(0, 3, 1, 2)
        B = x.shape[0]
        for s in range(self.n):
            i, R = s + 1, self.res[s]
            pe = getattr(self, f"patch_embed{i}")
            x = pe.norm(pe.proj(x).flatten(2).transpose(1, 2))
            if not self.v2:
                x = x + getattr(self, f"pos_embed{i}")
            for blk in getattr(self, f"block{i}"):
                x = blk(x)
            if self.v2:
                x = getattr(self, f"norm{i}")(x)
            if s + 1 < self.n:
                x = x.transpose(1, 2).reshape(B, -1, R, R)
        return self.head(x.mean(dim=1))

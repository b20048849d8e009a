"""Reference DeiT (the Agent-Attention repo's skeleton) with a per-block attention core; parameter
names equal the official state_dict keys."""
import torch
import torch.nn as nn

from attention import AgentCore, ElfattCore, FLattenCore, SoftmaxGlobal
from common import block_kinds, per_stage


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim, heads, kind, grid, cfg):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=cfg.get("qkv_bias", True))
        self.proj = nn.Linear(dim, dim)
        if kind == "native":
            self.core = SoftmaxGlobal(self, dim, heads)
        elif kind == "agent":
            self.core = AgentCore(self, dim, heads, per_stage(cfg, "agent_num", 49)[0], grid, grid, cls=True,
                                  agent_bias=cfg.get("agent_bias", True), dwc=cfg.get("dwc", True))
        elif kind == "flatten":
            self.core = FLattenCore(self, dim, heads, grid, grid, cls=True,
                                    p=cfg.get("focusing_factor", 3.0), kernel=cfg.get("dwc_kernel", 5),
                                    dwc=cfg.get("dwc", True))
        elif kind == "elfatt":
            self.core = ElfattCore(self, dim, heads, grid, grid, per_stage(cfg, "block_size", 1)[0], cls=True)
        else:
            raise ValueError(kind)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        return self.proj(self.core(q, k, v))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, kind, grid, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, kind, grid, cfg)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DeiT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, P, img = cfg["embed_dim"][0], cfg["patch_size"], cfg["img_size"]
        G = img // P
        kinds = block_kinds(cfg, 0)
        self.cls_token = nn.Parameter(torch.randn(1, 1, C) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + G * G, C) * 0.02)
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(cfg.get("in_chans", 3), C, P, stride=P)
        self.blocks = nn.ModuleList(
            Block(C, cfg["num_heads"][0], per_stage(cfg, "mlp_ratio", 4)[0], kinds[i], G, cfg)
            for i in range(cfg["depths"][0]))
        self.norm = nn.LayerNorm(C, eps=1e-6)
        self.head = nn.Linear(C, cfg["num_classes"])

    def forward(self, images_nhwc):
        x = self.patch_embed.proj(images_nhwc.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])

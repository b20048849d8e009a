"""Reference CSWin (the Agent-Attention / FLatten repos' skeleton) with per-branch attention cores;
parameter names equal the official state_dict keys."""
import torch
import torch.nn as nn

from attention import AgentCore, ElfattCore, FLattenCore, SoftmaxGlobal
from common import block_kinds, per_stage
from deit import Mlp


def img2windows(x, R, h, w):  # (B, R*R, C) -> (B * nW, h*w, C)
    B, L, C = x.shape
    x = x.view(B, R // h, h, R // w, w, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, h * w, C)


def windows2img(x, R, h, w):
    B = x.shape[0] // ((R // h) * (R // w))
    x = x.view(B, R // h, R // w, h, w, -1).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, R * R, -1)


class Branch(nn.Module):
    """attns.{k}: one stripe geometry; LePE (get_v) on V per stripe unless the core is agent."""

    def __init__(self, dim, heads, kind, h, w, cfg, stage):
        super().__init__()
        self.h, self.w, self.lepe = h, w, kind != "agent"
        if kind == "native":
            self.core = SoftmaxGlobal(self, dim, heads)
        elif kind == "agent":
            self.core = AgentCore(self, dim, heads, per_stage(cfg, "agent_num", 49)[stage], h, w,
                                  agent_bias=cfg.get("agent_bias", True), dwc=cfg.get("dwc", True),
                                  dwc_name="get_v")
        elif kind == "flatten":
            self.core = FLattenCore(self, dim, heads, h, w, p=cfg.get("focusing_factor", 3.0),
                                    kernel=cfg.get("dwc_kernel", 5), dwc=cfg.get("dwc", True))
        else:
            raise ValueError(kind)
        if self.lepe:
            self.get_v = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)

    def forward(self, q, k, v, R):
        q, k, v = (img2windows(t, R, self.h, self.w) for t in (q, k, v))
        out = self.core(q, k, v)
        if self.lepe:
            b, n, c = v.shape
            img = v.transpose(1, 2).reshape(b, c, self.h, self.w)
            out = out + self.get_v(img).flatten(2).transpose(1, 2)
        return windows2img(out, R, self.h, self.w)


class Block(nn.Module):
    def __init__(self, dim, heads, ratio, kind, R, last, cfg, stage):
        super().__init__()
        split = per_stage(cfg, "split_size", 7)[stage] if kind == "native" else \
            (per_stage(cfg, "attn_window", 0)[stage] or R)
        if last or split >= R or kind == "elfatt":
            split = R
        self.R, self.nb = R, 1 if split == R else 2
        self.qkv = nn.Linear(dim, 3 * dim, bias=cfg.get("qkv_bias", True))
        self.norm1 = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)
        self.elfatt = None
        if kind == "elfatt":  # one core over all heads; its LePE halves are attns.0/1.get_v
            self.elfatt = ElfattCore(self, dim, heads, R, R, per_stage(cfg, "block_size", 1)[stage],
                                     cswin_names=True)
        else:
            geoms = [(R, split)] if self.nb == 1 else [(R, split), (split, R)]
            self.attns = nn.ModuleList(Branch(dim // self.nb, heads // self.nb, kind, h, w, cfg, stage)
                                       for h, w in geoms)
        self.mlp = Mlp(dim, int(dim * ratio))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x):
        C = x.shape[-1]
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=-1)
        if self.elfatt is not None:
            a = self.elfatt(q, k, v)
        elif self.nb == 1:
            a = self.attns[0](q, k, v, self.R)
        else:
            h = C // 2
            a = torch.cat([self.attns[0](q[..., :h], k[..., :h], v[..., :h], self.R),
                           self.attns[1](q[..., h:], k[..., h:], v[..., h:], self.R)], dim=-1)
        x = x + self.proj(a)
        return x + self.mlp(self.norm2(x))


class CSwin(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, n = cfg["embed_dim"][0], len(cfg["depths"])
        self.stage1_conv_embed = nn.Sequential(nn.Conv2d(cfg.get("in_chans", 3), C, 7, 4, 2),
                                               nn.Identity(), nn.LayerNorm(C))
        R = (cfg["img_size"] + 4 - 7) // 4 + 1
        ratios = per_stage(cfg, "mlp_ratio", 4)
        self.res, self.n = [], n
        for s in range(n):
            C, kinds = cfg["embed_dim"][s], block_kinds(cfg, s)
            setattr(self, f"stage{s + 1}", nn.ModuleList(
                Block(C, cfg["num_heads"][s], ratios[s], kinds[j], R, s == n - 1, cfg, s)
                for j in range(cfg["depths"][s])))
            self.res.append(R)
            if s + 1 < n:
                mg = nn.Module()
                mg.conv = nn.Conv2d(C, cfg["embed_dim"][s + 1], 3, 2, 1)
                mg.norm = nn.LayerNorm(cfg["embed_dim"][s + 1])
                setattr(self, f"merge{s + 1}", mg)
                R = (R + 2 - 3) // 2 + 1
        self.norm = nn.LayerNorm(cfg["embed_dim"][-1])
        self.head = nn.Linear(cfg["embed_dim"][-1], cfg["num_classes"])

    def forward(self, images_nhwc):
        conv, _, norm = self.stage1_conv_embed
        x = norm(conv(images_nhwc.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2))
        B = x.shape[0]
        for s in range(self.n):
            for blk in getattr(self, f"stage{s + 1}"):
                x = blk(x)
            if s + 1 < self.n:
                R, mg = self.res[s], getattr(self, f"merge{s + 1}")
                x = mg.norm(mg.conv(x.transpose(1, 2).reshape(B, -1, R, R)).flatten(2).transpose(1, 2))
        return self.head(self.norm(x).mean(dim=1))

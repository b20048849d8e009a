"""Reference SiT (the DiT architecture as LeapLabTHU/Attention-Mediators and willisma/SiT build it),
written from vitc's spec (../shared/specs/mediators.md §1, §3) and read against the official
attention_mediator/models.py; parameter names equal the official state_dict keys. timm's PatchEmbed,
Attention and Mlp are written out here (timm is not needed). The network is NCHW as the official one;
make_fixture converts at the boundary to vitc's channels-last layout.

  python3 tools/ref/sit.py counts          exact parameter counts of the paper sizes
  python3 tools/ref/sit.py fixtures        writes tests/fixtures/sit/*.safetensors (tests/test_sit.c) from
                                           configs/tiny/sit_{mediator,native}.json, and one step of each
                                           sampler (spec §5, §6) on the tiny mediator SiT
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import st_io

# the paper sizes: depth, hidden, heads
SIZES = {"S": (12, 384, 6), "B": (12, 768, 12), "L": (24, 1024, 16), "XL": (28, 1152, 16)}


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Attention(nn.Module):
    """timm's Attention as SiT uses it: qkv (bias), softmax((q·s) kᵀ) v, proj."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads, self.scale = num_heads, (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        h = self.num_heads
        q, k, v = self.qkv(x).reshape(b, n, 3, h, c // h).permute(2, 0, 3, 1, 4)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class AttentionWithMediators(nn.Module):
    """Spec §3: n mediators average-pooled from the unscaled queries aggregate the values (softmax over
    the N keys), then broadcast back (softmax over the n mediators), each with position biases; a
    depthwise 3x3 conv of v is added before proj."""

    def __init__(self, dim, latent_size, num_heads, mediator_num):
        super().__init__()
        self.dim, self.latent_size, self.num_heads = dim, latent_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.mediator_num = n = mediator_num
        H, (G0, G1) = num_heads, latent_size
        self.dwc = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim)
        self.an_bias = nn.Parameter(torch.zeros(H, n, 7, 7))
        self.na_bias = nn.Parameter(torch.zeros(H, n, 7, 7))
        self.ah_bias = nn.Parameter(torch.zeros(1, H, n, G0, 1))
        self.aw_bias = nn.Parameter(torch.zeros(1, H, n, 1, G1))
        self.ha_bias = nn.Parameter(torch.zeros(1, H, G0, 1, n))
        self.wa_bias = nn.Parameter(torch.zeros(1, H, 1, G1, n))
        for p in (self.an_bias, self.na_bias, self.ah_bias, self.aw_bias, self.ha_bias, self.wa_bias):
            nn.init.trunc_normal_(p, std=0.02)  # absolute bounds ±2, as timm's
        self.pool_size = int(math.isqrt(n))

    def forward(self, x):
        b, n, c = x.shape
        g = int(math.isqrt(n))
        H, d, m = self.num_heads, c // self.num_heads, self.mediator_num
        q, k, v = self.qkv(x).reshape(b, n, 3, c).permute(2, 0, 1, 3)
        med = F.adaptive_avg_pool2d(q.reshape(b, g, g, c).permute(0, 3, 1, 2), (self.pool_size,) * 2)
        med = med.reshape(b, c, -1).permute(0, 2, 1)                     # (b, m, c), unscaled q
        heads = lambda t: t.reshape(b, -1, H, d).permute(0, 2, 1, 3)     # (b, H, tokens, d)
        q, k, v, med = heads(q), heads(k), heads(v), heads(med)
        bias1 = F.interpolate(self.an_bias, size=self.latent_size, mode="bilinear").reshape(1, H, m, -1)
        bias1 = bias1 + (self.ah_bias + self.aw_bias).reshape(1, H, m, -1)
        med_v = ((med * self.scale) @ k.transpose(-2, -1) + bias1).softmax(dim=-1) @ v
        bias2 = F.interpolate(self.na_bias, size=self.latent_size, mode="bilinear").reshape(1, H, m, -1)
        bias2 = bias2.permute(0, 1, 3, 2) + (self.ha_bias + self.wa_bias).reshape(1, H, -1, m)
        out = ((q * self.scale) @ med.transpose(-2, -1) + bias2).softmax(dim=-1) @ med_v
        out = out.transpose(1, 2).reshape(b, n, c)
        v = v.transpose(1, 2).reshape(b, g, g, c).permute(0, 3, 1, 2)
        out = out + self.dwc(v).permute(0, 2, 3, 1).reshape(b, n, c)
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden, freq_dim=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(freq_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.freq_dim = freq_dim

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype) / half)
        args = t[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)  # cos first

    def forward(self, t):
        return self.mlp(self.timestep_embedding(t, self.freq_dim))


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden, dropout_prob):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + int(dropout_prob > 0), hidden)
        self.num_classes, self.dropout_prob = num_classes, dropout_prob

    def forward(self, labels, train):
        if train and self.dropout_prob > 0:
            drop = torch.rand(labels.shape[0]) < self.dropout_prob
            labels = torch.where(drop, self.num_classes, labels)
        return self.embedding_table(labels)


class SiTBlock(nn.Module):
    def __init__(self, hidden, heads, latent_size, mlp_ratio, kind, mediator_num):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        if kind == "native":
            self.attn = Attention(hidden, heads)
        else:
            self.attn = AttentionWithMediators(hidden, latent_size, heads, mediator_num)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(hidden, int(hidden * mlp_ratio))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 6 * hidden))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class FinalLayer(nn.Module):
    def __init__(self, hidden, patch, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden, patch * patch * out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


def sincos_1d(dim, pos):
    omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_2d(dim, grid):
    """(grid², dim): [sin(col) | cos(col) | sin(row) | cos(row)], the column coordinate first."""
    col, row = np.meshgrid(np.arange(grid, dtype=np.float32), np.arange(grid, dtype=np.float32))
    return np.concatenate([sincos_1d(dim // 2, col), sincos_1d(dim // 2, row)], axis=1)


class SiT(nn.Module):
    """cfg: vitc's model section (arch "sit"): img_size is the latent size, in_chans its channels,
    embed_dim/depths/num_heads one-element lists, attn "native" or "mediator" (= "agent")."""

    def __init__(self, cfg):
        super().__init__()
        D, depth, heads = cfg["embed_dim"][0], cfg["depths"][0], cfg["num_heads"][0]
        p, size, C = cfg["patch_size"], cfg["img_size"], cfg.get("in_chans", 3)
        self.learn_sigma = cfg.get("learn_sigma", True)
        self.in_channels, self.out_channels = C, 2 * C if self.learn_sigma else C
        self.patch = p
        G = size // p
        kind = cfg.get("attn", "native")
        kind = kind[0] if isinstance(kind, list) else kind
        mlp_ratio = cfg.get("mlp_ratio", 4.0)
        mlp_ratio = mlp_ratio[0] if isinstance(mlp_ratio, list) else mlp_ratio
        self.x_embedder = nn.Module()
        self.x_embedder.proj = nn.Conv2d(C, D, p, stride=p)
        self.t_embedder = TimestepEmbedder(D)
        self.y_embedder = LabelEmbedder(cfg.get("num_classes", 1000), D, cfg.get("class_dropout_prob", 0.1))
        self.pos_embed = nn.Parameter(torch.zeros(1, G * G, D), requires_grad=False)
        self.blocks = nn.ModuleList(SiTBlock(D, heads, (G, G), mlp_ratio, "native" if kind == "native" else "mediator",
                                             cfg.get("mediator_num", 64)) for _ in range(depth))
        self.final_layer = FinalLayer(D, p, self.out_channels)
        self.initialize_weights(G)

    def initialize_weights(self, G):
        def basic(m):
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        self.apply(basic)
        self.pos_embed.data.copy_(torch.from_numpy(sincos_2d(self.pos_embed.shape[-1], G)).float().unsqueeze(0))
        w = self.x_embedder.proj.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.x_embedder.proj.bias)
        nn.init.normal_(self.y_embedder.embedding_table.weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
        for blk in self.blocks:
            nn.init.zeros_(blk.adaLN_modulation[-1].weight)
            nn.init.zeros_(blk.adaLN_modulation[-1].bias)
        for t in (self.final_layer.adaLN_modulation[-1].weight, self.final_layer.adaLN_modulation[-1].bias,
                  self.final_layer.linear.weight, self.final_layer.linear.bias):
            nn.init.zeros_(t)

    def unpatchify(self, x):
        c, p = self.out_channels, self.patch
        h = w = int(math.isqrt(x.shape[1]))
        x = x.reshape(x.shape[0], h, w, p, p, c)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(x.shape[0], c, h * p, w * p)

    def forward(self, x, t, y):
        """x (B, C, H, W), t (B) in [0, 1], y (B) -> (B, C, H, W) (NCHW, as the official)"""
        x = self.x_embedder.proj(x).flatten(2).transpose(1, 2) + self.pos_embed
        c = self.t_embedder(t) + self.y_embedder(y, self.training)
        for blk in self.blocks:
            x = blk(x, c)
        x = self.unpatchify(self.final_layer(x, c))
        return x.chunk(2, dim=1)[0] if self.learn_sigma else x


def paper_cfg(size, patch=2, attn="native", mediator_num=16, latent=32):
    depth, D, heads = SIZES[size]
    return {"arch": "sit", "img_size": latent, "patch_size": patch, "in_chans": 4, "num_classes": 1000,
            "embed_dim": [D], "depths": [depth], "num_heads": [heads], "attn": attn,
            "mediator_num": mediator_num, "learn_sigma": True, "class_dropout_prob": 0.1}


def counts():
    """sum(p.numel()) over model.parameters(), the frozen pos_embed included (as train.py counts)."""
    rows = []
    for size in SIZES:
        for attn, n in (("native", 0), ("mediator", 4), ("mediator", 16), ("mediator", 64)):
            m = SiT(paper_cfg(size, attn=attn, mediator_num=n or 16))
            rows.append((f"SiT-{size}/2", attn, n, sum(p.numel() for p in m.parameters())))
            del m
    for name, attn, n, total in rows:
        print(f"{name:9s} {attn:8s} n={n:<3d} {total:>10d} ({total / 1e6:.2f}M)")


def random_model(cfg, seed, cls=SiT):
    """cls(cfg) in double, in eval mode, every parameter but the frozen sin-cos pos_embed moved off
    its initialisation (adaLN-Zero would zero the output) by 0.1 N(0, 1) from torch seed `seed`"""
    torch.manual_seed(seed)
    model = cls(cfg).double()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname != "pos_embed":
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def make_fixture(config_path, out_dir, name, overrides=None, batch=3):
    """Random weights (every tensor moved off its init; pos_embed stays the frozen sin-cos table),
    x_t, t, y (one null label when the table has the null row), a target, the output,
    loss = mean((out - target)²) (the SiT velocity loss with target = x1 - x0), and the gradient of
    the loss with respect to every parameter. Tensors are channels-last as vitc holds them:
    input/target/output (B, H, W, C)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(config_path) as f:
        full = json.load(f)
    cfg = full["model"]
    cfg.update(overrides or {})
    model = random_model(cfg, seed=0)
    size, C = cfg["img_size"], cfg["in_chans"]
    x = torch.randn(batch, size, size, C, dtype=torch.float64)
    t = torch.rand(batch, dtype=torch.float64)
    y = torch.randint(0, cfg["num_classes"], (batch,))
    if cfg.get("class_dropout_prob", 0.1) > 0:
        y[-1] = cfg["num_classes"]  # the null (classifier-free guidance) class
    target = torch.randn(batch, size, size, C, dtype=torch.float64)
    out = model(x.permute(0, 3, 1, 2), t, y).permute(0, 2, 3, 1)
    loss = ((out - target) ** 2).mean()
    loss.backward()
    tensors = {"input": x, "t": t, "y": y.double(), "target": target, "output": out.detach(),
               "loss": loss.detach().reshape(1)}
    for pname, p in model.named_parameters():
        tensors["param/" + pname] = p.detach()
        tensors["grad/" + pname] = p.grad if p.grad is not None else torch.zeros_like(p)
    path = os.path.join(out_dir, name + ".safetensors")
    st_io.save(path, {k: v.numpy() for k, v in tensors.items()},
               {"config": json.dumps(full), "torch": torch.__version__})
    print(f"wrote {path}: {sum(p.numel() for p in model.parameters())} params, loss {loss.item():.6f}")


def guided_velocity(model, x, t, y, cfg_scale, null):
    """The network as the official samplers call it (spec §6): plain for cfg_scale <= 1; else the
    batch twice, the second half with the null label, guidance u + s (c - u) on channels 0-2 only
    (channel 3 on keeps each half's own output), and the conditional half returned. x channels-last."""
    tt = torch.full((x.shape[0],), t, dtype=x.dtype)
    if cfg_scale <= 1:
        return model(x.permute(0, 3, 1, 2), tt, y).permute(0, 2, 3, 1)
    both = torch.cat([x, x]).permute(0, 3, 1, 2)
    out = model(both, torch.cat([tt, tt]), torch.cat([y, torch.full_like(y, null)])).permute(0, 2, 3, 1)
    cond, uncond = out.chunk(2)
    guided = uncond[..., :3] + cfg_scale * (cond[..., :3] - uncond[..., :3])
    return torch.cat([guided, cond[..., 3:]], dim=-1)


def sde_drift(v, x, t, norm=1.0):
    """Euler-Maruyama's drift for the velocity model on the linear path: v + w(t) s with w = norm
    (1 - t) (diffusion_form "sigma") and the score s = (t v - x) / (1 - t) recovered from v"""
    score = (t * v - x) / (1 - t)
    return v + norm * (1 - t) * score


def make_step_fixture(config_path, out_dir, name="sit_sampler_steps", batch=2):
    """One step of each sampler on the tiny mediator SiT with random weights, in double: the SDE's
    Euler-Maruyama step at t = 0.3 (dt = 0.04, guidance 1.5, the noise eps stored), its final
    deterministic "Mean" step at t = 0.96 (dt = 0.04), an Euler ODE step at t = 0.25 (dt = 0.25) and a
    Heun step at t = 0.5 (dt = 0.25, guidance 1.5)."""
    with open(config_path) as f:
        full = json.load(f)
    cfg = full["model"]
    model = random_model(cfg, seed=1)
    size, C, null = cfg["img_size"], cfg["in_chans"], cfg["num_classes"]
    x = torch.randn(batch, size, size, C, dtype=torch.float64)
    eps = torch.randn(batch, size, size, C, dtype=torch.float64)
    y = torch.randint(0, null, (batch,))
    with torch.no_grad():
        t, dt = 0.3, 0.04
        v = guided_velocity(model, x, t, y, 1.5, null)
        sde = x + sde_drift(v, x, t) * dt + math.sqrt(2 * (1 - t)) * math.sqrt(dt) * eps
        t = 0.96
        mean = x + sde_drift(guided_velocity(model, x, t, y, 1.0, null), x, t) * 0.04
        t, dt = 0.25, 0.25
        euler = x + dt * guided_velocity(model, x, t, y, 1.0, null)
        t = 0.5
        v0 = guided_velocity(model, x, t, y, 1.5, null)
        v1 = guided_velocity(model, x + dt * v0, t + dt, y, 1.5, null)
        heun = x + 0.5 * dt * (v0 + v1)
    tensors = {"x": x, "eps": eps, "y": y.double(), "sde": sde, "mean": mean, "euler": euler, "heun": heun}
    for pname, p in model.named_parameters():
        tensors["param/" + pname] = p.detach()
    path = os.path.join(out_dir, name + ".safetensors")
    st_io.save(path, {k: v.numpy() for k, v in tensors.items()},
               {"config": json.dumps(full), "torch": torch.__version__})
    print(f"wrote {path}: one SDE, Mean, Euler and Heun step")


def make_fixtures(config_dir, out_dir):
    """The fixtures of tests/test_sit.c: the tiny SiT with mediators as the official default
    (learn_sigma, null class), and the vanilla one without learn_sigma and label dropout."""
    make_fixture(os.path.join(config_dir, "sit_mediator.json"), out_dir, "sit_mediator")
    make_fixture(os.path.join(config_dir, "sit_native.json"), out_dir, "sit_native_no_sigma",
                 {"learn_sigma": False, "class_dropout_prob": 0.0})
    make_step_fixture(os.path.join(config_dir, "sit_mediator.json"), out_dir)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "counts":
        counts()
    else:
        make_fixtures("configs/tiny", "tests/fixtures/sit")

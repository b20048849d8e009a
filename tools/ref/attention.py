"""Reference attention cores in PyTorch, written from vitc's specs (../shared/specs) to mirror the
official modules' parameter names and arithmetic. Each core takes the projected q, k, v (heads merged)
and returns the output before the output projection, like models/attn/*.c. A core registers its
parameters on the module that owns it (the backbone's attention module), so the state_dict names are
the official ones (e.g. blocks.0.attn.an_bias)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(x, heads):
    b, n, c = x.shape
    return x.reshape(b, n, heads, c // heads).permute(0, 2, 1, 3)


def merge_heads(x):
    b, h, n, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, n, h * d)


class SoftmaxGlobal:
    """DeiT / PVT multi-head attention: softmax((Q Kᵀ)·s) V."""

    def __init__(self, owner, dim, heads):
        self.heads, self.scale = heads, (dim // heads) ** -0.5

    def __call__(self, q, k, v):
        h = self.heads
        attn = (split_heads(q, h) @ split_heads(k, h).transpose(-2, -1)) * self.scale
        return merge_heads(attn.softmax(dim=-1) @ split_heads(v, h))


class AgentCore:
    """Agent attention (spec agent_attention.md §2): agents pooled from Q, two softmaxes with the
    agent biases, plus the depthwise-conv branch on V. Grid (h, w) for queries, (hk, wk) for keys;
    cls=True adds the DeiT class-token bias terms and keeps the cls token out of pooling and DWC."""

    def __init__(self, owner, dim, heads, agent_num, h, w, hk=None, wk=None, cls=False,
                 agent_bias=True, dwc=True, dwc_name="dwc"):
        self.owner = owner
        hk, wk = hk or h, wk or w
        self.heads, self.scale, self.agent_num = heads, (dim // heads) ** -0.5, agent_num
        self.h, self.w, self.hk, self.wk, self.cls = h, w, hk, wk, cls
        self.use_bias, self.dwc_name = agent_bias, dwc_name
        a = agent_num
        if agent_bias:
            owner.an_bias = nn.Parameter(torch.randn(heads, a, 7, 7) * 0.02)
            owner.na_bias = nn.Parameter(torch.randn(heads, a, 7, 7) * 0.02)
            owner.ah_bias = nn.Parameter(torch.randn(1, heads, a, hk, 1) * 0.02)
            owner.aw_bias = nn.Parameter(torch.randn(1, heads, a, 1, wk) * 0.02)
            owner.ha_bias = nn.Parameter(torch.randn(1, heads, h, 1, a) * 0.02)
            owner.wa_bias = nn.Parameter(torch.randn(1, heads, 1, w, a) * 0.02)
            if cls:
                owner.ac_bias = nn.Parameter(torch.randn(1, heads, a, 1) * 0.02)
                owner.ca_bias = nn.Parameter(torch.randn(1, heads, 1, a) * 0.02)
        if dwc:
            setattr(owner, dwc_name, nn.Conv2d(dim, dim, 3, padding=1, groups=dim))
        self.use_dwc = dwc

    def __call__(self, q, k, v):
        o = self.owner
        b, n, c = q.shape
        H, a, p = self.heads, self.agent_num, int(math.isqrt(self.agent_num))
        off = 1 if self.cls else 0
        grid_q = q[:, off:].reshape(b, self.h, self.w, c).permute(0, 3, 1, 2)
        agent = F.adaptive_avg_pool2d(grid_q, (p, p)).reshape(b, c, a).permute(0, 2, 1)
        qh, kh, vh, ah = (split_heads(t, H) for t in (q, k, v, agent))
        logits1 = (ah * self.scale) @ kh.transpose(-2, -1)
        logits2 = (qh * self.scale) @ ah.transpose(-2, -1)
        if self.use_bias:
            hk, wk, h, w = self.hk, self.wk, self.h, self.w
            b1 = F.interpolate(o.an_bias, size=(hk, wk), mode="bilinear").reshape(1, H, a, hk * wk)
            b1 = b1 + (o.ah_bias + o.aw_bias).reshape(1, H, a, hk * wk)
            b2 = F.interpolate(o.na_bias, size=(h, w), mode="bilinear").reshape(1, H, a, h * w)
            b2 = b2.permute(0, 1, 3, 2) + (o.ha_bias + o.wa_bias).reshape(1, H, h * w, a)
            if self.cls:
                b1 = torch.cat([o.ac_bias, b1], dim=-1)
                b2 = torch.cat([o.ca_bias, b2], dim=-2)
            logits1, logits2 = logits1 + b1, logits2 + b2
        agent_v = logits1.softmax(dim=-1) @ vh
        out = merge_heads(logits2.softmax(dim=-1) @ agent_v)
        if self.use_dwc:
            vg = v[:, off:].reshape(b, self.hk, self.wk, c).permute(0, 3, 1, 2)
            conv = getattr(o, self.dwc_name)(vg).permute(0, 2, 3, 1).reshape(b, -1, c)
            if off:
                out = torch.cat([out[:, :off], out[:, off:] + conv], dim=1)
            else:
                out = out + conv
        return out


class FLattenCore:
    """Focused linear attention (flatten.md §2.2): ReLU kernel / softplus(scale), focusing power p
    with norms over all channels, positional encoding on K, linear attention with the mean
    normaliser, and a depthwise conv of V shared by all heads (on patch tokens only when cls)."""

    def __init__(self, owner, dim, heads, h, w, cls=False, p=3.0, kernel=5, dwc=True, dwc_name="dwc",
                 hk=None, wk=None):
        self.owner, self.heads, self.h, self.w, self.cls, self.p = owner, heads, h, w, cls, p
        self.use_dwc, self.dwc_name = dwc, dwc_name
        hk, wk = hk or h, wk or w
        d, n = dim // heads, (1 if cls else 0) + hk * wk
        owner.scale = nn.Parameter(torch.zeros(1, 1, dim))
        owner.positional_encoding = nn.Parameter(torch.zeros(1, n, dim))
        if dwc:
            setattr(owner, dwc_name, nn.Conv2d(d, d, kernel, padding=kernel // 2, groups=d))

    def __call__(self, q, k, v):
        o, H = self.owner, self.heads
        b, n, c = q.shape
        m, d = k.shape[1], c // H
        k = k + o.positional_encoding
        scale = F.softplus(o.scale)
        q = (F.relu(q) + 1e-6) / scale
        k = (F.relu(k) + 1e-6) / scale
        qn, kn = q.norm(dim=-1, keepdim=True), k.norm(dim=-1, keepdim=True)
        q, k = q ** self.p, k ** self.p
        q = q / q.norm(dim=-1, keepdim=True) * qn
        k = k / k.norm(dim=-1, keepdim=True) * kn
        qh, kh, vh = split_heads(q, H), split_heads(k, H), split_heads(v, H)
        z = 1 / (qh @ kh.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
        kv = (kh.transpose(-2, -1) * (m ** -0.5)) @ (vh * (m ** -0.5))
        out = merge_heads(qh @ kv * z)
        if not self.use_dwc:
            return out
        off = 1 if self.cls else 0
        vp = vh[:, :, off:]  # (b, H, h*w, d): each head's channels as a d-channel image
        if vp.shape[2] != self.h * self.w:  # reduced keys: linear resize along the token index
            vp = F.interpolate(vp.permute(0, 1, 3, 2).reshape(b * H, d, -1), size=self.h * self.w,
                               mode="linear").reshape(b, H, d, -1).permute(0, 1, 3, 2)
        img = vp.reshape(b * H, self.h, self.w, d).permute(0, 3, 1, 2)
        conv = getattr(o, self.dwc_name)(img).permute(0, 2, 3, 1).reshape(b, H, self.h * self.w, d)
        conv = merge_heads(conv)
        if off:
            return torch.cat([out[:, :off], out[:, off:] + conv], dim=1)
        return out + conv


class SoftmaxWindow:
    """Swin W-MSA / SW-MSA: q scaled first, + relative position bias (+ the shift mask)."""

    def __init__(self, owner, dim, heads, w, mask=None):
        self.owner, self.heads, self.scale, self.w = owner, heads, (dim // heads) ** -0.5, w
        owner.relative_position_bias_table = nn.Parameter(torch.randn((2 * w - 1) ** 2, heads) * 0.02)
        ys, xs = torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")
        coords = torch.stack([ys.flatten(), xs.flatten()])  # 2, n
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
        owner.register_buffer("relative_position_index", rel[..., 0] * (2 * w - 1) + rel[..., 1])
        self.mask = mask  # (nW, n, n) or None

    def __call__(self, q, k, v):
        o, H = self.owner, self.heads
        b, n, c = q.shape
        attn = (split_heads(q, H) * self.scale) @ split_heads(k, H).transpose(-2, -1)
        bias = o.relative_position_bias_table[o.relative_position_index.reshape(-1)]
        attn = attn + bias.reshape(n, n, H).permute(2, 0, 1)
        if self.mask is not None:
            nw = self.mask.shape[0]
            attn = attn.reshape(b // nw, nw, H, n, n) + self.mask[None, :, None].to(attn.dtype)
            attn = attn.reshape(b, H, n, n)
        return merge_heads(attn.softmax(dim=-1) @ split_heads(v, H))


class ElfattCore:
    """ELFATT (elfatt.md, no official code): floor(h/2) global linear heads (softmax of Q over
    features, of K over tokens, no scale) and block-local softmax heads (bs x bs blocks per side,
    scale d^-1/2), each + LePE on V (whole map / per block), concatenated [global | local]."""

    def __init__(self, owner, dim, heads, h, w, blocks, cswin_names=False, cls=False):
        self.owner, self.heads, self.h, self.w, self.bs, self.cls = owner, heads, h, w, blocks, cls
        self.hg = heads // 2
        self.c1 = self.hg * (dim // heads)
        self.cswin = cswin_names
        if cswin_names:  # attns.0.get_v (global half), attns.1.get_v (local half)
            owner.attns = nn.ModuleList(nn.Module() for _ in range(2))
            for m in owner.attns:
                m.get_v = nn.Conv2d(dim // 2, dim // 2, 3, padding=1, groups=dim // 2)
        else:
            owner.lepe = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)

    def _lepe(self, x, start):  # x (B, c, h, w) channels [start, start + c)
        o = self.owner
        if self.cswin:
            return o.attns[0 if start == 0 else 1].get_v(x)
        c = x.shape[1]
        return F.conv2d(x, o.lepe.weight[start:start + c], o.lepe.bias[start:start + c], padding=1, groups=c)

    def __call__(self, q, k, v):
        """With a class token (our proposal for DeiT): an ordinary token of the global heads, its own
        one-token block in the local heads, no LePE."""
        b, n, C = q.shape
        h, w, c1, hg = self.h, self.w, self.c1, self.hg
        hl, c2, d = self.heads - hg, C - c1, C // self.heads
        off = 1 if self.cls else 0
        qg = split_heads(q[..., :c1], hg).softmax(dim=-1)
        kg = split_heads(k[..., :c1], hg).softmax(dim=-2)
        vg = v[..., :c1]
        glob = merge_heads(qg @ (kg.transpose(-2, -1) @ split_heads(vg, hg)))
        lepe = self._lepe(vg[:, off:].transpose(1, 2).reshape(b, c1, h, w), 0).flatten(2).transpose(1, 2)
        glob = torch.cat([glob[:, :off], glob[:, off:] + lepe], dim=1)
        cls_local = v[:, :off, c1:]
        q, k, v = q[:, off:], k[:, off:], v[:, off:]
        n = n - off
        bh, bw, nb = h // self.bs, w // self.bs, self.bs * self.bs

        def blockify(t):
            t = t.reshape(b, self.bs, bh, self.bs, bw, c2).permute(0, 1, 3, 2, 4, 5)
            return t.reshape(b * nb, bh * bw, c2)

        ql, kl, vl = (blockify(t[..., c1:]) for t in (q, k, v))
        attn = (split_heads(ql, hl) @ split_heads(kl, hl).transpose(-2, -1)) * d ** -0.5
        loc = merge_heads(attn.softmax(dim=-1) @ split_heads(vl, hl))
        loc = loc + self._lepe(vl.transpose(1, 2).reshape(b * nb, c2, bh, bw), c1).flatten(2).transpose(1, 2)
        loc = loc.reshape(b, self.bs, self.bs, bh, bw, c2).permute(0, 1, 3, 2, 4, 5).reshape(b, n, c2)
        return torch.cat([glob, torch.cat([cls_local, loc], dim=1)], dim=-1)

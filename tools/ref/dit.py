"""Reference of DiT's Gaussian diffusion for model.arch "dit", written from the facts of
facebookresearch/DiT's diffusion package (the linear beta schedule over 1000 steps, space_timesteps
and the respaced betas, eps prediction with the learned-range variance, the training loss "MSE" =
mse(eps) + the variational bound with eps held fixed, the discretised Gaussian decoder NLL at t = 0,
ancestral sampling with guidance on output channels 0-2) in float64 torch, on the network of
tools/ref/sit.py returning all of its output channels as DiT's forward does.

  python3 tools/ref/dit.py     writes tests/fixtures/sit/dit_ddpm.safetensors (tests/test_ddpm.c)
"""
import json
import math
import os

import numpy as np
import torch

import sit
import st_io

T_TRAIN = 1000


class DiT(sit.SiT):
    def forward(self, x, t, y):
        """DiT's forward: every channel of the final layer (eps, then the variance values)"""
        x = self.x_embedder.proj(x).flatten(2).transpose(1, 2) + self.pos_embed
        c = self.t_embedder(t) + self.y_embedder(y, self.training)
        for blk in self.blocks:
            x = blk(x, c)
        return self.unpatchify(self.final_layer(x, c))


def kept_steps(steps, total=T_TRAIN):
    """space_timesteps(total, [steps]): one section, stride (total - 1) / (steps - 1), Python round"""
    stride = (total - 1) / (steps - 1)
    kept, at = [], 0.0
    for _ in range(steps):
        kept.append(round(at))
        at += stride
    return sorted(set(kept))


class Process:
    """The 1000-step linear-beta process, respaced to `steps` kept steps (all 1000: itself)."""

    def __init__(self, steps=T_TRAIN):
        base = np.linspace(1e-4, 0.02, T_TRAIN, dtype=np.float64)
        base_cumprod = np.cumprod(1.0 - base)
        self.timestep = kept_steps(steps) if steps < T_TRAIN else list(range(T_TRAIN))
        last, betas = 1.0, []
        for i in self.timestep:
            betas.append(1.0 - base_cumprod[i] / last)
            last = base_cumprod[i]
        b = np.array(betas)
        ac = np.cumprod(1.0 - b)
        ac_prev = np.append(1.0, ac[:-1])
        post_var = b * (1.0 - ac_prev) / (1.0 - ac)
        self.beta, self.ac = b, ac
        self.post_logvar = np.log(np.append(post_var[1], post_var[1:]))
        self.coef1 = b * np.sqrt(ac_prev) / (1.0 - ac)
        self.coef2 = (1.0 - ac_prev) * np.sqrt(1.0 - b) / (1.0 - ac)
        self.sqrt_recip = np.sqrt(1.0 / ac)
        self.sqrt_recipm1 = np.sqrt(1.0 / ac - 1.0)

    def at(self, name, i, like):
        """the per-sample value of array `name` at steps i, broadcast over like's (B, C, H, W)"""
        v = torch.tensor(getattr(self, name)[i], dtype=like.dtype)
        return v.view(-1, *([1] * (like.dim() - 1)))

    def mean_logvar(self, out, x, i):
        """p(x_{i-1} | x_i) of the network output out (B, 2C, H, W): mean, log variance"""
        C = x.shape[1]
        eps_hat, v = out[:, :C], out[:, C:]
        pred_x0 = self.at("sqrt_recip", i, x) * x - self.at("sqrt_recipm1", i, x) * eps_hat
        mean = self.at("coef1", i, x) * pred_x0 + self.at("coef2", i, x) * x
        frac = (v + 1) / 2
        logvar = frac * torch.log(self.at("beta", i, x)) + (1 - frac) * self.at("post_logvar", i, x)
        return mean, logvar


def std_normal_cdf(z):
    return 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def decoder_log_likelihood(x0, mean, log_scale):
    """log P(x0's 1/255 bin) under N(mean, e^(2 log_scale)); the edge bins below -0.999 and above
    0.999 open-ended; logs of values under 1e-12 clamped"""
    inv = torch.exp(-log_scale)
    upper = std_normal_cdf(inv * (x0 - mean + 1 / 255))
    lower = std_normal_cdf(inv * (x0 - mean - 1 / 255))
    inner = torch.log((upper - lower).clamp(min=1e-12))
    return torch.where(x0 < -0.999, torch.log(upper.clamp(min=1e-12)),
                       torch.where(x0 > 0.999, torch.log((1 - lower).clamp(min=1e-12)), inner))


def training_loss(proc, out, x0, xt, eps, t):
    """per-sample mse(eps_hat, eps) + bound (bits), the bound on the variance only, averaged"""
    C = x0.shape[1]
    frozen = torch.cat([out[:, :C].detach(), out[:, C:]], dim=1)
    mean, logvar = proc.mean_logvar(frozen, xt, t)
    true_mean = proc.at("coef1", t, x0) * x0 + proc.at("coef2", t, x0) * xt
    true_logvar = proc.at("post_logvar", t, x0)
    kl = 0.5 * (-1 + logvar - true_logvar + torch.exp(true_logvar - logvar)
                + (true_mean - mean) ** 2 * torch.exp(-logvar))
    nll = -decoder_log_likelihood(x0, mean, 0.5 * logvar)
    dims = list(range(1, x0.dim()))
    bound = torch.where(torch.tensor(t) == 0, nll.mean(dim=dims), kl.mean(dim=dims)) / math.log(2.0)
    mse = ((eps - out[:, :C]) ** 2).mean(dim=dims)
    return (mse + bound).mean()


def guided(model, x, ts, y, scale, null):
    """DiT's forward_with_cfg: [x; x] with [y; null], channels 0-2 of the output guided, the other
    channels each half's own; the conditional half"""
    if scale <= 1:
        return model(x, ts, y)
    out = model(torch.cat([x, x]), torch.cat([ts, ts]), torch.cat([y, torch.full_like(y, null)]))
    cond, uncond = out.chunk(2)
    mixed = uncond[:, :3] + scale * (cond[:, :3] - uncond[:, :3])
    return torch.cat([mixed, cond[:, 3:]], dim=1)


def nhwc(x):
    return x.permute(0, 2, 3, 1)


def make_fixture(config_path, out_dir, name="dit_ddpm"):
    """The tiny DiT (the mediator SiT's network returning eps and variance) with random weights:
    the training loss of a batch at steps 0 (the decoder NLL), 1, 500 and 999 with data that
    touches both edge bins, every parameter gradient; one guided ancestral step (scale 1.5) at step
    37 of a 50-step respacing and the unguided last one (step 0, no noise); the kept steps and the
    schedule of the 50- and 250-step respacings. Channels-last for vitc."""
    with open(config_path) as f:
        full = json.load(f)
    cfg = full["model"]
    cfg["arch"] = "dit"
    full["model"] = cfg
    model = sit.random_model(cfg, seed=2, cls=DiT)
    size, C, null = cfg["img_size"], cfg["in_chans"], cfg["num_classes"]
    t = [0, 1, 500, 999]
    B = len(t)
    x0 = (0.8 * torch.randn(B, C, size, size, dtype=torch.float64)).clamp(-1, 1)
    x0[:, :, 0, 0], x0[:, :, 0, 1] = -1.0, 1.0  # the open-ended edge bins
    eps = torch.randn(B, C, size, size, dtype=torch.float64)
    y = torch.randint(0, null, (B,))
    proc = Process()
    xt = proc.at("ac", t, x0).sqrt() * x0 + (1 - proc.at("ac", t, x0)).sqrt() * eps
    out = model(xt, torch.tensor(t, dtype=torch.float64), y)
    loss = training_loss(proc, out, x0, xt, eps, t)
    loss.backward()
    tensors = {"x0": nhwc(x0), "xt": nhwc(xt), "eps": nhwc(eps), "t": torch.tensor(t, dtype=torch.float64),
               "y": y.double(), "output": nhwc(out.detach()), "loss": loss.detach().reshape(1)}
    for pname, p in model.named_parameters():
        tensors["param/" + pname] = p.detach()
        tensors["grad/" + pname] = p.grad if p.grad is not None else torch.zeros_like(p)
    spaced = Process(50)
    x = torch.randn(2, C, size, size, dtype=torch.float64)
    noise = torch.randn(2, C, size, size, dtype=torch.float64)
    ys = torch.randint(0, null, (2,))
    with torch.no_grad():
        for label, i, scale in (("step37", 37, 1.5), ("step0", 0, 1.0)):
            ts = torch.full((2,), float(spaced.timestep[i]), dtype=torch.float64)
            mean, logvar = spaced.mean_logvar(guided(model, x, ts, ys, scale, null), x, [i, i])
            tensors[label] = nhwc(mean + (1.0 if i > 0 else 0.0) * torch.exp(0.5 * logvar) * noise)
    tensors.update({"step_x": nhwc(x), "step_noise": nhwc(noise), "step_y": ys.double()})
    for steps in (50, 250):
        p = Process(steps)
        tensors[f"kept{steps}"] = torch.tensor(p.timestep, dtype=torch.float64)
        for field in ("beta", "ac", "post_logvar", "coef1", "coef2"):
            tensors[f"s{steps}/{field}"] = torch.from_numpy(getattr(p, field))
    path = os.path.join(out_dir, name + ".safetensors")
    st_io.save(path, {k: v.contiguous().numpy() for k, v in tensors.items()},
               {"config": json.dumps(full), "torch": torch.__version__})
    print(f"wrote {path}: loss {loss.item():.6f}, a guided and a last ancestral step, 2 respacings")


if __name__ == "__main__":
    make_fixture("configs/tiny/sit_mediator.json", "tests/fixtures/sit")

"""Writes tests/fixtures/grid_resize.safetensors: tensors laid over the input's grid, under their
official state_dict names ("from:NAME"), and their resizes for another input size ("to:NAME") as the
official fine-tuning scripts make them with F.interpolate (align_corners=False): DeiT's main.py for
pos_embed, load_pretrained of Agent attention (its ah/aw/ha/wa biases: linear along their grid axis,
as (heads, agents, cells) rows), of Swin (relative_position_bias_table: bicubic over the (2w-1)^2
grid of each head) and of FLatten (positional_encoding: bicubic over its grid of each channel), and
the patch-embedding kernels (bicubic over each kernel); and under "mediators.from:" / "mediators.to:"
the agent biases as the Attention Mediators' resolution fine-tune of SiT resizes them
(train_256to512.py: linear with align_corners=True)."""
import sys

import torch
import torch.nn.functional as F

import st_io


def bicubic(x, size):
    return F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False)


def pos_embed(t, size, lead):
    """(1, lead + g*g, C): the grid after the leading class token"""
    g = int((t.shape[1] - lead) ** 0.5)
    grid = t[:, lead:].reshape(1, g, g, -1).permute(0, 3, 1, 2)
    grid = bicubic(grid, size).permute(0, 2, 3, 1).flatten(1, 2)
    return torch.cat([t[:, :lead], grid], dim=1)


def bias_table(t, size):
    """(S*S, heads)"""
    s = int(t.shape[0] ** 0.5)
    return bicubic(t.t().reshape(1, -1, s, s), size).reshape(t.shape[1], -1).t()


def agent_bias(t, size, axis, align_corners=False):
    """linear along axis (of 5), the other axes kept: the rows are (heads, agents) or heads x agents"""
    moved = t.movedim(axis, -1)
    rows = moved.reshape(-1, 1, moved.shape[-1])
    out = F.interpolate(rows, size=size, mode="linear", align_corners=align_corners)
    return out.reshape(*moved.shape[:-1], size).movedim(-1, axis)


def main(path):
    torch.manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape).double()  # (float32 values, as the file holds them)

    cases = [
        ("pos_embed", rand(1, 1 + 25, 4), lambda t: pos_embed(t, 8, 1)),
        ("pos_embed2", rand(1, 25, 4), lambda t: pos_embed(t, 3, 0)),
        ("blocks.0.attn.positional_encoding", rand(1, 49, 4), lambda t: pos_embed(t, 12, 0)),
        ("layers.3.blocks.0.attn.relative_position_bias_table", rand(169, 3),
         lambda t: bias_table(t, 23)),
        ("patch_embed.proj.weight", rand(2, 3, 4, 4), lambda t: bicubic(t, 6)),
        ("blocks.0.attn.ah_bias", rand(1, 2, 3, 7, 1), lambda t: agent_bias(t, 12, 3)),
        ("blocks.0.attn.aw_bias", rand(1, 2, 3, 1, 7), lambda t: agent_bias(t, 4, 4)),
        ("blocks.0.attn.ha_bias", rand(1, 2, 7, 1, 3), lambda t: agent_bias(t, 12, 2)),
        ("blocks.0.attn.wa_bias", rand(1, 2, 1, 7, 3), lambda t: agent_bias(t, 12, 3)),
    ]
    # the Attention Mediators' resolution fine-tune of SiT (train_256to512.py): align_corners=True
    mediators = [
        ("blocks.0.attn.ah_bias", rand(1, 2, 4, 4, 1), lambda t: agent_bias(t, 8, 3, True)),
        ("blocks.0.attn.aw_bias", rand(1, 2, 4, 1, 4), lambda t: agent_bias(t, 8, 4, True)),
        ("blocks.0.attn.ha_bias", rand(1, 2, 4, 1, 4), lambda t: agent_bias(t, 8, 2, True)),
        ("blocks.0.attn.wa_bias", rand(1, 2, 1, 7, 4), lambda t: agent_bias(t, 3, 3, True)),
    ]
    tensors = {}
    for style, group in (("", cases), ("mediators.", mediators)):
        for name, t, resize in group:
            tensors[style + "from:" + name] = t
            tensors[style + "to:" + name] = resize(t)
    st_io.save(path, tensors, {"torch": torch.__version__})


if __name__ == "__main__":
    main(sys.argv[1])

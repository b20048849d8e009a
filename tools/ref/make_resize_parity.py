"""Writes tests/fixtures/pos_embed_resize.safetensors: a 5x5 grid of 4-channel embeddings (cells
row-major, as a position embedding holds them) and PyTorch's bicubic resizes of it to 8x8 and 3x3,
F.interpolate(mode="bicubic", align_corners=False): what DeiT's official fine-tuning does to a
pretrained pos_embed for another input size."""
import sys

import torch
import torch.nn.functional as F

import st_io

G, C = 5, 4


def resized(grid, size):
    x = grid.reshape(G, G, C).permute(2, 0, 1)[None]
    y = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False)
    return y[0].permute(1, 2, 0).reshape(size * size, C)


def main(path):
    torch.manual_seed(0)
    grid = torch.randn(G * G, C).double()  # (float32 values, as the file holds them)
    st_io.save(path, {"grid": grid, "up8": resized(grid, 8), "down3": resized(grid, 3)},
               {"torch": torch.__version__})


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""Fits the piecewise polynomials of Phi, the standard normal CDF, that src/cpu/elementwise.c's bf16
GELUs use on AVX-512: [-6, 6) cut into 32 pieces, on each a degree-5 polynomial in t, the position
within the piece (0 at its left end, 1 at its right), least squares on Chebyshev nodes weighted
by 1/Phi (relative error, which the far negative tail needs). Writes src/cpu/gelu_pieces.h (run from
the repository root) and prints the relative errors of Phi and of its derivative, evaluated in
float32. Needs numpy."""
from math import erfc, pi, sqrt

import numpy as np

LO, HI, PIECES, DEGREE = -6.0, 6.0, 32, 5
width = (HI - LO) / PIECES
nodes = (1 + np.cos(np.pi * (np.arange(80) + 0.5) / 80)) / 2


def phi_cdf(x):
    return np.array([0.5 * erfc(-v / sqrt(2)) for v in x])


def phi_pdf(x):
    return np.exp(-x * x / 2) / sqrt(2 * pi)


coef = np.zeros((DEGREE + 1, PIECES))  # highest degree first, as Horner's rule takes them
for i in range(PIECES):
    left = LO + i * width
    y = phi_cdf(left + nodes * width)
    coef[:, i] = np.polyfit(nodes, y, DEGREE, w=1 / y)

c32 = coef.astype(np.float32)
worst_cdf = worst_pdf = worst_cdf_bulk = 0.0
for i in range(PIECES):
    left = LO + i * width
    t = np.linspace(0, 1, 2001, dtype=np.float32)
    x = left + t.astype(np.float64) * width
    p = np.zeros_like(t)
    d = np.zeros_like(t)
    for k in range(DEGREE + 1):
        d = d * t + p if k else d  # the derivative alongside, as the C code takes it
        p = p * t + c32[k, i]
    cdf, pdf = phi_cdf(x), phi_pdf(x)
    rel = np.abs(p / cdf - 1)
    worst_cdf = max(worst_cdf, rel.max())
    if left >= -4:
        worst_cdf_bulk = max(worst_cdf_bulk, rel.max())
    worst_pdf = max(worst_pdf, np.abs(d / np.float32(width) - pdf).max())

with open("src/cpu/gelu_pieces.h", "w") as f:
    f.write("/* Written by tools/fit_gelu_pieces.py: Phi on %d pieces of [%g, %g), a degree-%d "
            "polynomial on\n * each in t in [0, 1] (the position within the piece), "
            "coefficients highest degree first. */\n" % (PIECES, LO, HI, DEGREE))
    f.write("#pragma once\n")
    f.write("#define GELU_PIECES_LO %.1ff\n#define GELU_PIECES_HI %.1ff\n" % (LO, HI))
    f.write("#define GELU_PIECES %d\n#define GELU_PIECES_DEGREE %d\n" % (PIECES, DEGREE))
    f.write("static const float gelu_pieces[GELU_PIECES_DEGREE + 1][GELU_PIECES] = {\n")
    for k in range(DEGREE + 1):
        f.write("    {\n")
        for j in range(0, PIECES, 4):
            f.write("        " + " ".join("%.9ef," % v for v in c32[k, j : j + 4]) + "\n")
        f.write("    },\n")
    f.write("};\n")
print("Phi relative error in float32: %.2e (pieces from -4 up: %.2e); its derivative's absolute "
      "error: %.2e" % (worst_cdf, worst_cdf_bulk, worst_pdf))

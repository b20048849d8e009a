#!/usr/bin/env python3
"""Fits the rational approximation R(a) = P(a) / Q(a), Q(0) = 1, deg P = 4, deg Q = 5, of the Mills
ratio M(a) = Phi(-a) / phi(a) on [0, 7] that src/cpu/elementwise.c uses for GELU: linearised least
squares P - M (Q - 1) = M, reweighted towards the worst relative errors. Prints the coefficients,
highest degree first as mills_p and mills_q hold them, and the relative error of R evaluated in
float32. Needs numpy."""
from math import erfc, pi, sqrt

import numpy as np

a = np.linspace(0.0, 7.0, 40000)
mills = np.array([0.5 * erfc(x / sqrt(2)) for x in a]) / (np.exp(-a * a / 2) / sqrt(2 * pi))


def horner(coef, x):
    v = np.zeros_like(x)
    for c in coef[::-1]:
        v = v * x + c
    return v


def fit(weights, deg_p=4, deg_q=5):
    cols = [a**k for k in range(deg_p + 1)] + [-mills * a**k for k in range(1, deg_q + 1)]
    A = np.array(cols).T
    c, *_ = np.linalg.lstsq(A * weights[:, None], mills * weights, rcond=None)
    return c[: deg_p + 1], np.concatenate([[1.0], c[deg_p + 1 :]])


w = 1 / mills
for _ in range(40):
    P, Q = fit(w)
    err = np.abs(horner(P, a) / horner(Q, a) / mills - 1)
    w = w * (err / err.max() + 1e-4) ** 0.5
    w /= w.max()
af = a.astype(np.float32)
rel32 = np.abs(horner(P.astype(np.float32), af) / horner(Q.astype(np.float32), af) / mills - 1)
print("mills_p", [float(c) for c in P[::-1]])
print("mills_q", [float(c) for c in Q[::-1]])
print("relative error: float64 %.2e, float32 %.2e; min Q on [0, 50] %.3f"
      % (err.max(), rel32.max(), horner(Q, np.linspace(0, 50, 5000)).min()))

#!/usr/bin/env python3
"""Fit e(M) = gemm_max * M / (M + half_m) to AMD's own tuned GEMM tables (ROCm/aiter configs).

    python calibrate/fit_gemm_amd.py

numpy + perfmodel, no GPU. The inputs are rows copied from aiter's tuned-GEMM CSVs
(calibrate/data/aiter-*.csv, each file's header names the source file and commit): the kernel
time aiter's tuner measured for each (M, N, K) on one chip. The model fitted is the roofline's
own GEMM time (core/roofline.py), as in calibrate/fit_gemm_dtype.py:
    t(M) = max(2MNK / (peak * e(M)), bytes / bw) + kernel_s
with the chip's datasheet peak (hardware_db), bw and kernel_s the model's defaults for the chip
(core/efficiency.py), on every row with M >= FIT_MIN_M (below it the GEMMs are bound by the
weight stream and a latency floor and say nothing about the matrix units); least squares on log
time over a (gemm_max, half_m) grid. Prints the fit, its spread, and the vendor default's error.
"""
from __future__ import annotations

import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from perfmodel.core.efficiency import VENDOR, default_efficiency  # noqa: E402
from perfmodel.core.hardware import load_gpu                      # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FIT_MIN_M = 128
GEMM_MAX_GRID = np.arange(0.10, 0.801, 0.0025)
HALF_M_GRID = np.arange(0.0, 2000.1, 5.0)
SETS = [  # (file, chip whose peak / bandwidth price it, bytes per output element)
    ("aiter-a8w8-rowwise-gfx950-llama-tp8.csv", "mi355x", 2),
    ("aiter-a8w8-blockscale-gfx942-cu304-dsv3.csv", "mi300x", 2),
    ("aiter-a8w8-blockscale-gfx950-cu256-dsv3.csv", "mi355x", 2),
]


def read(name: str) -> dict[str, np.ndarray]:
    with open(os.path.join(DATA, name)) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return {k: np.array([float(r[k]) for r in rows]) for k in ("M", "N", "K", "us")}


def model_s(d, peak, bw, kernel_s, gemm_max, half_m, out_bytes=2):
    m, n, k = d["M"], d["N"], d["K"]
    e = np.asarray(gemm_max)[..., None] * m / (m + np.asarray(half_m)[..., None])
    flops = 2 * m * n * k
    nbytes = n * k + m * k + out_bytes * m * n        # 1-byte weights and activations
    return np.maximum(flops / (peak * e), nbytes / bw) + kernel_s


def fit(name: str, gpu: str, out_bytes: int = 2):
    d = read(name)
    hw = load_gpu(gpu)
    eff = default_efficiency(hw)
    peak = hw.peak_flops_per_s["fp8"]
    bw = hw.memory_bandwidth_bytes_per_s * eff.mem_bw_fraction
    sel = d["M"] >= FIT_MIN_M
    ds = {k: v[sel] for k, v in d.items()}
    t = ds["us"] * 1e-6
    gm, hm = np.meshgrid(GEMM_MAX_GRID, HALF_M_GRID, indexing="ij")
    pred = model_s(ds, peak, bw, eff.kernel_s, gm.ravel(), hm.ravel(), out_bytes)
    err = np.sum(np.log(pred / t) ** 2, axis=1)
    i = int(np.argmin(err))
    g, h = gm.ravel()[i], hm.ravel()[i]
    ratio = pred[i] / t
    vend = model_s(ds, peak, bw, eff.kernel_s, [VENDOR[hw.vendor][1]], [VENDOR[hw.vendor][2]],
                   out_bytes)[0] / t
    print(f"{name} ({gpu}, peak {peak / 1e12:.0f} TFLOP/s, {sel.sum()} rows with M >= {FIT_MIN_M})")
    print(f"  fit gemm_max {g:.3f} half_m {h:.0f}: rms {np.sqrt(err[i] / sel.sum()):.3f} in log, "
          f"pred/meas {ratio.min():.2f}-{ratio.max():.2f} (median {np.median(ratio):.2f})")
    print(f"  vendor default {VENDOR[hw.vendor][1]} / {VENDOR[hw.vendor][2]:.0f}: pred/meas "
          f"{vend.min():.2f}-{vend.max():.2f} (median {np.median(vend):.2f}), "
          f"rms {np.sqrt(np.mean(np.log(vend) ** 2)):.3f}")
    for m in sorted(set(ds["M"])):
        s = ds["M"] == m
        tf = 2 * ds["M"][s] * ds["N"][s] * ds["K"][s] / t[s] / 1e12
        print(f"    M {int(m):6d}: measured {np.median(tf):7.0f} TFLOP/s median "
              f"({tf.min():.0f}-{tf.max():.0f}), fit {g * m / (m + h) * peak / 1e12:7.0f}")
    return g, h


if __name__ == "__main__":
    for name, gpu, ob in SETS:
        fit(name, gpu, ob)
        print()

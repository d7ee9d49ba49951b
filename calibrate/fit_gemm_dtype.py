#!/usr/bin/env python3
"""Fit e(M) = gemm_max * M / (M + half_m) per GEMM kind to a bench_gemm_dtype.py result.

    python calibrate/fit_gemm_dtype.py calibrate/data/gemm-dtype-h200-sxm-20261201.json

numpy + perfmodel, no torch. The model being fitted is the roofline's own GEMM time
(core/roofline.py, DESIGN.md):
    t(M) = max(2MNK / (peak[dtype] * e(M)), bytes / COPY_BYTES_PER_S) + KERNEL_S
on every record with M >= FIT_MIN_M (below it the GEMMs are bound by the weight stream and say
nothing about the matrix units), least squares on log time over a (gemm_max, half_m) grid.
Prints the fit per kind, the median measured TFLOP/s per kind and M (the table in
calibrate/BENCH_NOTES.md), and the fused activation-quantization rates.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PEAK_PER_S = {"bf16": 989.4e12, "fp8": 1978.9e12}   # H200 SXM dense, hardware_db h200-sxm
KIND_PEAK = {"bf16": "bf16", "fp8_tensor": "fp8", "fp8_row": "fp8", "fp8_block": "fp8"}
COPY_BYTES_PER_S = 4275e9   # HBM copy, 2 GiB, same card type (calibrate/BENCH_NOTES.md)
KERNEL_S = 2.5e-6           # the vendor kernel_s the model adds per kernel (core/efficiency.py)
FIT_MIN_M = 128
GEMM_MAX_GRID = np.arange(0.50, 0.951, 0.001)
HALF_M_GRID = np.arange(0.0, 400.01, 0.5)


def model_s(recs: list[dict], peak: float, gemm_max, half_m):
    """Roofline time of each record for arrays of (gemm_max, half_m) broadcast on axis 0."""
    m = np.array([r["M"] for r in recs], dtype=float)
    flops = np.array([r["flops"] for r in recs], dtype=float)
    nbytes = np.array([r["bytes"] for r in recs], dtype=float)
    gm = np.asarray(gemm_max, dtype=float)[..., None]
    h = np.asarray(half_m, dtype=float)[..., None]
    e = gm * m / (m + h)
    return np.maximum(flops / (peak * e), nbytes / COPY_BYTES_PER_S) + KERNEL_S


def fit(recs: list[dict], peak: float) -> dict:
    """Grid least squares on log time; returns gemm_max, half_m and the |errors|."""
    recs = [r for r in recs if r["M"] >= FIT_MIN_M]
    meas = np.log(np.array([r["seconds"] for r in recs], dtype=float))
    best = (np.inf, 0.0, 0.0)
    for gm in GEMM_MAX_GRID:
        cost = ((np.log(model_s(recs, peak, np.full(HALF_M_GRID.shape, gm), HALF_M_GRID)) - meas) ** 2).sum(1)
        i = int(np.argmin(cost))
        if cost[i] < best[0]:
            best = (float(cost[i]), float(gm), float(HALF_M_GRID[i]))
    _, gm, h = best
    err = np.abs(model_s(recs, peak, gm, h) / np.exp(meas) - 1.0)
    return {"gemm_max": gm, "half_m": h, "points": len(recs),
            "median_abs_err": float(np.median(err)), "max_abs_err": float(np.max(err))}


def table(recs: list[dict]) -> list[str]:
    kinds = [k for k in KIND_PEAK if any(r["kind"] == k for r in recs)]
    lines = ["| M | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for m in sorted({r["M"] for r in recs}):
        cells = []
        for k in kinds:
            v = [r["flops_per_s"] / 1e12 for r in recs if r["kind"] == k and r["M"] == m]
            cells.append(f"{statistics.median(v):.0f}" if v else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def _load(path: str) -> dict:
    """A bench_gemm_dtype.py result, or SystemExit(2) with a one-line reason."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        _fail(f"cannot read {path!r}: {e}")
    if not isinstance(raw, dict) or not isinstance(raw.get("gemm", {}).get("records"), list):
        _fail(f"{path!r} is not a bench_gemm_dtype.py result (no gemm.records)")
    return raw


def _fail(why: str):
    print(f"fit_gemm_dtype: {why}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    recs = _load(argv[0])["gemm"]["records"]
    for kind, peak_key in KIND_PEAK.items():
        these = [r for r in recs if r["kind"] == kind]
        if these:
            print(kind, fit(these, PEAK_PER_S[peak_key]))
    print("\n".join(table(recs)))
    for path in argv[1:]:
        q = _load(path).get("quant", {}).get("records", [])
        for kind in ("group128", "row", "tensor", "cast"):
            v = [r["bytes_per_s"] / 1e9 for r in q if r["impl"] == "compiled_static" and r["kind"] == kind]
            if v:
                print(f"quant {kind} (one fused kernel): {min(v):.0f}-{max(v):.0f} GB/s, median {statistics.median(v):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

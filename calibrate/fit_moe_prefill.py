#!/usr/bin/env python3
"""Fit the routed-expert GEMM law (core/grouped_gemm.py) to a bench_moe_prefill.py result.

    python calibrate/fit_moe_prefill.py calibrate/data/moe-prefill-h200-sxm-20261201.json \
        calibrate/data/moe-decode-h200-sxm-20261201.json

numpy + perfmodel, no torch. The law is the model's own time of one expert GEMM (gate_up or
down) of one GPU's shard:
    t = max(2 R K N / (peak_fp8 * e(r) * depth(K)), weight_bytes / (bw * e_mem)) + kernel_s
    e(r)     = fraction * gemm_max * r / max(b, r + b/2)   (r rows per expert, b-row tiles)
    depth(K) = min(1, (K / (K + half_k)) / (K_ref / (K_ref + half_k)))
with the H200's fp8 peak, its block-scaled fp8 gemm_max (core/efficiency.py), its memory
fraction, and the fused kernel of the records (kind triton_fp8_block: vLLM's fused_moe). The two
kernel parameters (fraction, half_k) are fitted by least squares on log time over a grid, on the
records where the compute term can bind (FIT_MIN_ROWS rows per expert and up); every record is
reported. Prints the fit and, per prompt size, the median predicted/measured time of the old
and the fitted law (the table in calibrate/MOE_PREFILL_NOTES.md).
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from perfmodel.core.efficiency import default_efficiency  # noqa: E402
from perfmodel.core.grouped_gemm import (DEPTH_REF_K, GROUPED_SMALL_TILE_ROWS,  # noqa: E402
                                         GROUPED_TILE_ROWS)
from perfmodel.core.hardware import load_gpu  # noqa: E402

KIND = "triton_fp8_block"
FIT_MIN_ROWS = 64.0          # below, the weight stream bounds the kernel: nothing to fit
FRACTION_GRID = np.arange(0.20, 1.001, 0.005)
HALF_K_GRID = np.arange(100.0, 1500.1, 10.0)


def card() -> dict:
    """The H200's numbers the model prices an fp8 block-scaled expert GEMM with."""
    hw = load_gpu("h200-sxm")
    eff = default_efficiency(hw)
    curve = eff.for_gemm("fp8_block")
    return {"peak": hw.peak_flops_per_s["fp8"], "gemm_max": curve.gemm_max,
            "gemm_half_m": curve.gemm_half_m,
            "bw": hw.memory_bandwidth_bytes_per_s * eff.mem_bw_fraction, "kernel_s": eff.kernel_s}


def load(paths) -> list[dict]:
    """The fused-kernel records of bench_moe_prefill.py results."""
    out = []
    for p in paths:
        with open(p) as f:
            out += [r for r in json.load(f)["records"] if r["kind"] == KIND]
    return out


def arrays(recs: list[dict]) -> dict:
    rows = np.array([r["M"] / touched(r) for r in recs])     # rows per touched expert (op.rows)
    return {"r": rows, "top_k": np.array([r["top_k"] for r in recs], dtype=float),
            "K": np.array([r["K"] for r in recs], dtype=float),
            "flops": np.array([r["flops"] for r in recs], dtype=float),
            "wbytes": np.array([touched(r) * r["K"] * r["N"] for r in recs]),   # fp8: 1 byte
            "s": np.array([r["seconds"] for r in recs])}


def touched(r: dict) -> float:
    """Local experts that T tokens routed uniformly to k of E reach at least once
    (core/ops.expected_experts, over this GPU's share)."""
    return r["experts"] * (1.0 - (1.0 - r["top_k"] / r["experts_total"]) ** r["T"])


def law_s(a: dict, c: dict, fraction, half_k):
    """Model time of each record; fraction and half_k broadcast on a leading axis."""
    f = np.atleast_1d(np.asarray(fraction, dtype=float))[..., None]
    h = np.atleast_1d(np.asarray(half_k, dtype=float))[..., None]
    b = np.where(a["r"] <= a["top_k"], GROUPED_SMALL_TILE_ROWS, GROUPED_TILE_ROWS)
    e = f * c["gemm_max"] * a["r"] / np.maximum(b, a["r"] + b / 2)
    depth = np.minimum(1.0, (a["K"] / (a["K"] + h)) / (DEPTH_REF_K / (DEPTH_REF_K + h)))
    return np.maximum(a["flops"] / (c["peak"] * e * depth), a["wbytes"] / c["bw"]) + c["kernel_s"]


def old_law_s(a: dict, c: dict):
    """The law before this fit (main 56f8b49): 0.4 * min(e_gemm(r), gemm_max * pad(r)), K_half 720."""
    b = np.where(a["r"] <= a["top_k"], GROUPED_SMALL_TILE_ROWS, GROUPED_TILE_ROWS)
    pad = c["gemm_max"] * a["r"] / np.maximum(b, a["r"] + b / 2)
    e = 0.4 * np.minimum(c["gemm_max"] * a["r"] / (a["r"] + c["gemm_half_m"]), pad)
    depth = np.minimum(1.0, (a["K"] / (a["K"] + 720.0)) / (DEPTH_REF_K / (DEPTH_REF_K + 720.0)))
    return np.maximum(a["flops"] / (c["peak"] * e * depth), a["wbytes"] / c["bw"]) + c["kernel_s"]


def fit(recs: list[dict], c: dict | None = None) -> dict:
    """Grid least squares on log time over the records with r >= FIT_MIN_ROWS."""
    c = c or card()
    a = arrays([r for r in recs if r["M"] / touched(r) >= FIT_MIN_ROWS])
    best = (np.inf, 0.0, 0.0)
    for h in HALF_K_GRID:
        err = np.log(law_s(a, c, FRACTION_GRID, h) / a["s"])
        sse = np.sum(err ** 2, axis=1)
        i = int(np.argmin(sse))
        if sse[i] < best[0]:
            best = (float(sse[i]), float(FRACTION_GRID[i]), float(h))
    ratio = law_s(a, c, best[1], best[2])[0] / a["s"]
    return {"fraction": best[1], "half_k": best[2], "points": len(a["s"]),
            "median_abs_err": float(np.median(np.abs(ratio - 1))),
            "max_abs_err": float(np.max(np.abs(ratio - 1)))}


def ratios(recs: list[dict], fraction: float, half_k: float, c: dict | None = None):
    """Predicted / measured time of every record under the law."""
    a = arrays(recs)
    return law_s(a, c or card(), fraction, half_k)[0] / a["s"]


def main(argv=None) -> int:
    paths = (argv or sys.argv[1:]) or ["calibrate/data/moe-prefill-h200-sxm-20261201.json"]
    try:
        recs = load(paths)
        if not any(r["M"] / touched(r) >= FIT_MIN_ROWS for r in recs):
            raise ValueError(f"no {KIND} records with >= {FIT_MIN_ROWS:.0f} rows per expert")
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
        print(f"fit_moe_prefill: {paths}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    c = card()
    res = fit(recs, c)
    print(f"fit over {res['points']} records with r >= {FIT_MIN_ROWS:.0f}: fraction "
          f"{res['fraction']:.3f}, half_k {res['half_k']:.0f}; |err| median "
          f"{res['median_abs_err']:.1%}, max {res['max_abs_err']:.1%}")
    new = ratios(recs, res["fraction"], res["half_k"], c)
    old = old_law_s(arrays(recs), c) / arrays(recs)["s"]
    print("T       r (median)   fitted law pred/meas (median, max |err|)   old law (median)")
    for T in sorted({r["T"] for r in recs}):
        idx = [i for i, r in enumerate(recs) if r["T"] == T]
        rows = statistics.median(recs[i]["M"] / touched(recs[i]) for i in idx)
        v = new[idx]
        print(f"{T:<7} {rows:8.0f}   {np.median(v):6.2f}  {np.max(np.abs(v - 1)):6.1%}"
              f"                  {np.median(old[idx]):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

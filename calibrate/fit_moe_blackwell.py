#!/usr/bin/env python3
"""What published fused-MoE timings on datacenter Blackwell imply for the grouped-GEMM law.

    python calibrate/fit_moe_blackwell.py

numpy + perfmodel, no GPU. Each record is one GPU's share of one MoE layer, timed by its
publisher (source and numbers below). For each, the model's own time of the two routed-expert
GEMMs (core/grouped_gemm.py: the card's peak x gemm_max x the tile-padding law x the depth law,
or the touched experts' weight stream, whichever is longer, + kernel_s per GEMM; the same law as
calibrate/fit_moe_prefill.py) is solved for the kernel fraction f that gives the measured time.
Prints each record's implied f and the law's predicted/measured time at the shipped Blackwell
fraction and at the Hopper one (core/efficiency.py BLACKWELL_GROUPED_KERNEL_FRACTION).

The published times cover the whole MoE call (routing, activation quantization, the two grouped
GEMMs, the finalize sum), which the model prices as separate ops: a whole-call record implies a
lower bound on f; the difference of two token counts of one sweep cancels the fixed part.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from perfmodel.core.efficiency import (BLACKWELL_GROUPED_KERNEL_FRACTION,  # noqa: E402
                                       default_efficiency)
from perfmodel.core.efficiency_spec import HOPPER_GROUPED_KERNEL_FRACTION  # noqa: E402
from perfmodel.core.grouped_gemm import (GROUPED_SMALL_TILE_ROWS, GROUPED_TILE_ROWS,  # noqa: E402
                                         depth_efficiency)
from perfmodel.core.hardware import load_gpu  # noqa: E402
from perfmodel.core.precision import parse_format  # noqa: E402
from perfmodel.core.units import US  # noqa: E402

_PR5301 = ("flashinfer-ai/flashinfer PR #5301 (benchmarks/bench_moe_deepseek.py, one B300 SXM6 "
           "AC, CUDA 13.2, CUDA graphs, cold L2): TRTLLM NVFP4 column, repeat 1")
_HF_BLOG = ("'TFLOPS Gap: Why FP4 MoE Kernel Engineering Matters on Blackwell' (Hugging Face "
            "blog, one B200): peak throughput at batch 4096, time = 6 T k D F / TFLOP/s")
_BLOG_FLOPS = 6 * 4096 * 4 * 2880 * 7680

RECORDS = [
    # NVFP4 = fp4 with one 8-bit scale per 16 elements (fp4-g16). DeepSeek-V3 shard of EP8:
    # 32 local of 256 experts, D 7168, F 2048, top-8
    dict(name="B300 trtllm-gen NVFP4 DSv3 EP8 16384 tok", source=_PR5301, gpu="b300",
         weights="fp4-g16", D=7168, F=2048, E=256, k=8, ep=8, T=16384, seconds=0.622597e-3),
    dict(name="B300 trtllm-gen NVFP4 DSv3 EP8 8192 tok", source=_PR5301, gpu="b300",
         weights="fp4-g16", D=7168, F=2048, E=256, k=8, ep=8, T=8192, seconds=0.385540e-3),
    # GPT-OSS-20B-like layer on one GPU: E 32, top-4, D 2880, F 7680 (as the blog states them)
    dict(name="B200 SGLang NVFP4 MoE 4096 tok", source=_HF_BLOG, gpu="b200", weights="fp4-g16",
         D=2880, F=7680, E=32, k=4, ep=1, T=4096, seconds=_BLOG_FLOPS / 1262e12),
    dict(name="B200 FlashInfer CuTe DSL NVFP4 MoE 4096 tok", source=_HF_BLOG, gpu="b200",
         weights="fp4-g16", D=2880, F=7680, E=32, k=4, ep=1, T=4096, seconds=_BLOG_FLOPS / 1225e12),
    dict(name="B200 vLLM NVFP4 MoE 4096 tok", source=_HF_BLOG, gpu="b200", weights="fp4-g16",
         D=2880, F=7680, E=32, k=4, ep=1, T=4096, seconds=_BLOG_FLOPS / 1117e12),
]
MARGINAL = ("B300 trtllm-gen NVFP4 DSv3 EP8 16384 tok", "B300 trtllm-gen NVFP4 DSv3 EP8 8192 tok")
"""The pair whose difference prices the 8192 extra tokens alone."""


def rows_per_expert(rec: dict) -> tuple[float, float, float]:
    """(routed rows M, touched local experts, rows per touched expert r) of one GPU's share
    under uniform routing (core/ops.expected_experts over the local experts)."""
    local = rec["E"] / rec["ep"]
    touched = local * (1.0 - (1.0 - rec["k"] / rec["E"]) ** rec["T"])
    rows = rec["T"] * rec["k"] / rec["ep"]
    return rows, touched, rows / touched


def law_s(rec: dict, fraction: float) -> float:
    """The model's time of the gate/up and down GEMMs of one GPU's share at kernel fraction f."""
    if fraction <= 0:
        raise ValueError(f"kernel fraction must be positive, got {fraction}")
    hw = load_gpu(rec["gpu"])
    eff = default_efficiency(hw)
    peak = hw.peak_flops_per_s[parse_format(rec["weights"]).name]
    wbytes = parse_format(rec["weights"]).bytes_per_element
    rows, touched, r = rows_per_expert(rec)
    b = GROUPED_SMALL_TILE_ROWS if r <= rec["k"] else GROUPED_TILE_ROWS
    e = fraction * eff.gemm_max * r / max(b, r + b / 2)
    bw = hw.memory_bandwidth_bytes_per_s * eff.mem_bw_fraction
    t = 0.0
    for K, N in ((rec["D"], 2 * rec["F"]), (rec["F"], rec["D"])):
        compute = 2 * rows * K * N / (peak * e * depth_efficiency(K))
        t += max(compute, touched * K * N * wbytes / bw) + eff.kernel_s
    return t


def implied_fraction(time_of_fraction, measured_s: float) -> float:
    """The fraction f in (0.01, 1] whose law time equals measured_s (bisection: the law's time
    falls as f grows); 1.0 when even f = 1 is slower than measured."""
    lo, hi = 0.01, 1.0
    if time_of_fraction(hi) >= measured_s:
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if time_of_fraction(mid) > measured_s else (lo, mid)
    return (lo + hi) / 2


def implied_all() -> dict[str, float]:
    """Each record's implied fraction, and the marginal pair's (key 'marginal')."""
    out = {rec["name"]: implied_fraction(lambda f, rec=rec: law_s(rec, f), rec["seconds"])
           for rec in RECORDS}
    hi, lo = (next(r for r in RECORDS if r["name"] == n) for n in MARGINAL)
    out["marginal"] = implied_fraction(lambda f: law_s(hi, f) - law_s(lo, f),
                                       hi["seconds"] - lo["seconds"])
    return out


def main() -> int:
    implied = implied_all()
    print(f"{'record':46s} {'r':>5s} {'meas us':>8s} {'implied f':>9s} "
          f"{'pred/meas f=' + format(BLACKWELL_GROUPED_KERNEL_FRACTION, '.3f'):>16s} "
          f"{'f=' + format(HOPPER_GROUPED_KERNEL_FRACTION, '.3f'):>8s}")
    for rec in RECORDS:
        r = rows_per_expert(rec)[2]
        bw = law_s(rec, BLACKWELL_GROUPED_KERNEL_FRACTION) / rec["seconds"]
        hop = law_s(rec, HOPPER_GROUPED_KERNEL_FRACTION) / rec["seconds"]
        print(f"{rec['name']:46s} {r:5.0f} {rec['seconds'] / US:8.1f} {implied[rec['name']]:9.3f} "
              f"{bw:16.2f} {hop:8.2f}")
    print(f"{'marginal: ' + ' - '.join(n.split()[-2] for n in MARGINAL) + ' tokens':46s} "
          f"{'':5s} {'':8s} {implied['marginal']:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

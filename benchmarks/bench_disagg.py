"""Disaggregated serving speed: api.serve_disagg (two pools, closed loop by fixed point) vs
api.serve (one pool) on the same model, GPU and levels, and the opt-in `size --disagg`
search vs the default `size`, measured side by side in one run.

    python benchmarks/bench_disagg.py
"""

from __future__ import annotations

import time

from perfmodel import api
from perfmodel.analysis import sizing
from perfmodel.analysis.sizing_disagg import size_disagg

LOAD = dict(prompt_tokens=2048, output_tokens=256, concurrencies=[1, 16, 64])
SIZE = dict(rate_rps=5.0, prompt=2048, output=256, ttft_slo_s=1.0, tpot_slo_s=0.05)


def best_of(fn, reps: int = 2) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    agg = best_of(lambda: api.serve("llama-3.1-8b", "h100-sxm", **LOAD))
    dis = best_of(lambda: api.serve_disagg("llama-3.1-8b", "h100-sxm", prefill=dict(workers=1),
                                           decode=dict(workers=2), **LOAD))
    print(f"serve (1 pool)          {agg:8.3f} s")
    print(f"serve_disagg (1P + 2D)  {dis:8.3f} s   ratio {dis / agg:5.1f}x")
    s_agg = best_of(lambda: sizing.size("llama-3.1-70b", gpus=["h100-sxm"], precisions=["fp8"],
                                        **SIZE), reps=1)
    s_dis = best_of(lambda: size_disagg("llama-3.1-70b", "h100-sxm", weights="fp8",
                                        max_gpus=8, **SIZE), reps=1)
    print(f"size (h100, fp8)        {s_agg:8.3f} s")
    print(f"size --disagg addition  {s_dis:8.3f} s   ratio {s_dis / s_agg:5.1f}x")


if __name__ == "__main__":
    main()

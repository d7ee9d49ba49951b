"""Sizing speed: a search over every GPU in hardware_db x 1, 2, 4, 8 GPUs x four precisions x
a concurrency grid, vectorized (one step evaluation per replica shape, all concurrencies and
pipeline depths stacked) vs the same search with one step evaluation per concurrency point
(an unvectorized loop), measured side by side in one run.

    python benchmarks/bench_sizing.py
"""

from __future__ import annotations

import time
from dataclasses import fields

import numpy as np

from perfmodel.serving import batching
from perfmodel.analysis import sizing
from perfmodel.serving.batching import Curve
from perfmodel.core.hardware import list_gpus

REQUEST = dict(model="llama-3.1-70b", rate_rps=10.0, prompt=1000, output=300, ttft_slo_s=1.0,
               tpot_slo_s=0.05, counts=[1, 2, 4, 8], precisions=["bf16", "fp8", "int4", "fp4"])


def curves_loop(scs, grids, prompt, output, lims, *, weights=None, **kw) -> list[Curve]:
    """batching.curves, one concurrency and one scenario at a time."""
    out = []
    for i, (sc, grid, lim) in enumerate(zip(scs, grids, lims)):
        w = weights[i] if weights else None
        points = [batching.curve(sc, [c], prompt, output, lim, weights=w, **kw) for c in grid]
        out.append(Curve(**{f.name: np.concatenate([getattr(p, f.name) for p in points])
                            for f in fields(Curve)}))
    return out


def timed(reps: int = 3) -> tuple[float, sizing.SizingResult]:
    best, result = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = sizing.size(**REQUEST)
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    sizing.size(**REQUEST)                       # warm caches (YAML parsing) outside the timing
    vec_s, vec = timed()
    vectorized = sizing.curves
    sizing.curves = curves_loop
    try:
        loop_s, loop = timed(reps=1)
    finally:
        sizing.curves = vectorized
    same = [d.model_dump() for d in vec.deployments] == [d.model_dump() for d in loop.deployments]
    print(f"search: {len(list_gpus())} GPUs x counts {REQUEST['counts']} x "
          f"{len(REQUEST['precisions'])} precisions, {vec.evaluated} replica shapes evaluated, "
          f"{len(vec.deployments)} deployments listed")
    print(f"vectorized sizing: {vec_s:.3f} s")
    print(f"per-concurrency loop: {loop_s:.3f} s")
    print(f"speed-up: {loop_s / vec_s:.1f}x   (identical results: {same})")
    top = vec.deployments[0] if vec.deployments else vec.nearest_miss
    if top is not None:
        print(f"cheapest: {top.count} x {top.gpu} tp={top.tp} pp={top.pp} {top.precision}, "
              f"${top.usd_per_hour}/h, binding {top.binding}")


if __name__ == "__main__":
    main()

"""Serving-simulator speed: one closed-loop curve (llama-3.1-8b, fp8 weights and KV, H100 SXM,
vLLM, 1024 in / 1024 out, 10 x C requests per level) with the simulator as shipped (one
step-cost surface per curve, decode-only runs priced in one vectorized call) versus the same
scheduler pricing every step with its own op-list evaluation and no jumps (a per-step naive
loop), measured side by side in one run. On the H100 the C=512 and C=1024 levels outgrow the
KV cache and preempt thousands of times (one event every step or two); the same curve on a
B200, where every level fits, is timed too. The naive loop runs the small levels only (it takes
minutes beyond) and its time per simulated step is printed for comparison.

    python benchmarks/bench_serve.py
"""

from __future__ import annotations

import time

import numpy as np

from perfmodel import api
from perfmodel.core.resolve import resolve
from perfmodel.core.roofline import step_time
from perfmodel.serving import simulate as sim_mod
from perfmodel.serving.stepcost import HEAD_OPS

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
KW = dict(weights="fp8", kv="fp8", engine="vllm", prompt_tokens=1024, output_tokens=1024)
LEVELS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
NAIVE_LEVELS = [2, 4, 8, 16]


class NaiveCost:
    """Every step priced by its own op-list evaluation (body, head and attention parts)."""

    def __init__(self, sc):
        self.sc = sc

    def step_s(self, d, sum_ctx, chunks=(), chunk_ctx=(), finishing=0) -> float:
        sc = self.sc
        M = d + float(sum(chunks))
        B = [1.0, d + finishing or 1.0] + ([float(d)] if d else []) + [1.0] * len(chunks)
        T = [M, 1.0] + ([1.0] if d else []) + [float(c) for c in chunks]
        S = [0.0, 0.0] + ([sum_ctx / d] if d else []) + [float(s) for s in chunk_ctx]
        est = step_time(sc.model, sc.hw, sc.precision, sc.engine, sc.eff, np.array(B),
                        np.array(T), np.array(S), dep=sc.dep, attention=sc.attention)
        gpu = 0.0
        for op in est.ops:
            t = np.broadcast_to(np.asarray(op.time_s, dtype=float), (len(B),))
            if op.kind == "attention":
                gpu += float(t[2:].sum()) if (d or chunks) else 0.0
            elif op.name in HEAD_OPS:
                gpu += float(t[1]) if (d + finishing) else 0.0
            else:
                gpu += float(t[0])
        cpu = float(np.max(est.cpu_s)) - sc.engine.cpu_overhead_per_step_s
        return max(gpu, cpu) + sc.engine.cpu_overhead_per_step_s

    def decode_run_s(self, d, mean_ctx0, k):
        return np.array([self.step_s(d, d * (mean_ctx0 + j)) for j in range(k)])


def run_levels(levels, gpu: str = GPU) -> tuple[float, list]:
    t0 = time.perf_counter()
    rep = api.serve(MODEL, gpu, concurrencies=levels, timeline=True, **KW)
    return time.perf_counter() - t0, rep.points


def main() -> None:
    api.serve(MODEL, GPU, concurrencies=[1], **KW)           # YAML parsing outside the timing
    fast_s, points = run_levels(LEVELS)
    steps = sum(sum(p.timeline.steps) for p in points if p.timeline)
    print(f"simulator: {len(LEVELS)} levels (C {LEVELS[0]}..{LEVELS[-1]}), "
          f"{sum(p.num_requests for p in points)} requests, {steps} steps in {fast_s:.2f} s")
    for p in points:
        print(f"  C={p.concurrency:5d}  TTFT p50 {p.ttft_p50_s * 1e3:8.1f} ms  TPOT p50 "
              f"{p.tpot_p50_s * 1e3:6.2f} ms  {p.output_tok_s_total:8.0f} tok/s  "
              f"preemptions {p.preemptions}")

    api.serve(MODEL, "b200", concurrencies=[1], **KW)
    b200_s, b200 = run_levels(LEVELS, "b200")
    print(f"same curve on b200 (the KV cache holds every level: "
          f"{sum(p.preemptions for p in b200)} preemptions): {b200_s:.2f} s")

    small_s, small = run_levels(NAIVE_LEVELS)
    sc, _, _ = resolve(MODEL, GPU, weights=KW["weights"], kv=KW["kv"], engine=KW["engine"])
    original = sim_mod._cost
    sim_mod._cost = lambda sc_, wls, pols: NaiveCost(sc_)
    try:
        t0 = time.perf_counter()
        naive = api.serve(MODEL, GPU, concurrencies=NAIVE_LEVELS, **KW).points
        naive_s = time.perf_counter() - t0
    finally:
        sim_mod._cost = original
    small_steps = sum(sum(p.timeline.steps) for p in small)
    worst = max(abs(a.ttft_p50_s / b.ttft_p50_s - 1) for a, b in zip(small, naive))
    print(f"levels {NAIVE_LEVELS}: simulator {small_s:.3f} s, naive per-step loop {naive_s:.2f} s "
          f"-> x{naive_s / small_s:.0f} ({small_steps} steps; naive {naive_s / small_steps * 1e6:.0f} "
          f"us/step, simulator {small_s / small_steps * 1e6:.1f} us/step); TTFT p50 agree within "
          f"{worst:.2%}")
    print(f"full curve: simulator {fast_s:.2f} s; naive at its per-step rate would take "
          f"~{steps * naive_s / small_steps:.0f} s (x{steps * naive_s / small_steps / fast_s:.0f})")


if __name__ == "__main__":
    main()

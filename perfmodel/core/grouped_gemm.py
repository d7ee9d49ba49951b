"""Reduction depth of the routed-expert GEMMs: why thin expert shards run below a dense GEMM's rate.

A tiled GEMM computes each [tile_M x tile_N] output tile in K / tile_K main-loop iterations;
filling the pipeline, promoting the fp8 block scales and storing the tile cost a fixed amount
per tile, so the achieved fraction of peak grows with the reduction depth K as K / (K + K_HALF).
DeepGEMM's README (deepseek-ai/DeepGEMM, H800, FP8 1x128/128x128 block scaling, "normal GEMMs
for dense models", M = 4096 rows) measures, for K = 512, 1536, 2048, 7168, 16384:
590, 990, 1025, 1304, 1358 TFLOP/s; a*K/(K + K_HALF) with K_HALF = 720 and a = 1422 TFLOP/s
fits all five within 3% (least squares on log time: 591, 968, 1052, 1292, 1362). Its MoE
grouped GEMMs follow the same law (contiguous layout, 8192 rows per group: K = 7168 gives
1297 TFLOP/s, K = 2048 gives 1099).

The vendor gemm_max (core/efficiency.py) was measured on dense layer shapes with K >= 4096
(calibrate/BENCH_NOTES.md: Llama-8B qkv, gate_up with K = 4096 and down with K = 14336), so
the depth factor is taken relative to DEPTH_REF_K and never exceeds 1: dense GEMMs keep their
rate. Where it bites is the routed experts under tensor parallelism: each expert's FFN width
F is split over the moe_tp = tp*dp/ep GPUs that hold a slice of it, and the down projection
reduces over that slice, K = F / moe_tp (SGLang/vLLM fused_moe and TRT-LLM's MoE plugin
shard the intermediate dimension; DeepSeek-V3 at TP8: 2048 / 8 = 256). Its gate/up
projections reduce over d_model and keep their rate.

Applied to the "experts" op only: the shared experts and dense MLPs run as ordinary GEMMs
whose TP shards are the calibrated case (a deliberate scope limit, so dense predictions
do not move).
"""

from __future__ import annotations

from perfmodel.core.specs import Deployment, ModelSpec

DEPTH_HALF_K = 720.0
"""K at which a tiled GEMM reaches half its deep-K rate (fit to DeepGEMM's README, above)."""
DEPTH_REF_K = 4096.0
"""Reduction depth of the shapes the vendor gemm_max was measured on (calibrate/BENCH_NOTES.md)."""


def depth_efficiency(k: float) -> float:
    """Fraction of the deep-K rate a GEMM reducing over k reaches, relative to the reference
    depth, at most 1: (k / (k + K_HALF)) / (K_ref / (K_ref + K_HALF))."""
    if k <= 0:
        raise ValueError(f"reduction depth must be positive, got {k}")
    rel = (k / (k + DEPTH_HALF_K)) / (DEPTH_REF_K / (DEPTH_REF_K + DEPTH_HALF_K))
    return min(1.0, rel)


def moe_tp(dep: Deployment) -> float:
    """GPUs that each hold a slice of one routed expert: the tp x dp GPUs of a stage hold
    E/ep experts each, so every expert is split over tp*dp/ep of them (core/parallel.py)."""
    return max(1.0, dep.tp * dep.dp / max(dep.ep, 1))


def expert_depth_factor(m: ModelSpec, dep: Deployment) -> float:
    """Compute-time multiplier (>= 1) of the routed-expert GEMMs from their reduction depths.

    The experts op is (up + 1) GEMMs of equal FLOPs: gate and up (up = 2 when gated) reduce over
    D, down over F / moe_tp, so the time scales by
        up/(up+1) / r(D) + 1/(up+1) / r(F / moe_tp),   r = depth_efficiency.
    Worked number, DeepSeek-V3 (D = 7168, F = 2048) at TP8 without EP: r(7168) = 1,
    r(256) = (256/976) / (4096/4816) = 0.308, factor = 2/3 + 1/3 / 0.308 = 1.75."""
    if m.moe is None:
        return 1.0
    up = 2 if m.gated_mlp else 1
    width = m.moe.expert_ffn_dim / moe_tp(dep)           # K of the down projection per GPU
    return (up / (up + 1) / depth_efficiency(m.d_model)
            + 1 / (up + 1) / depth_efficiency(width))

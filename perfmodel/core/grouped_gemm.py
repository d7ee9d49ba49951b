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

import numpy as np

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


# ----------------------------------------------------------------------------- tile padding

GROUPED_TILE_ROWS = 64.0
"""Rows of one tile of the grouped expert GEMM at prompt-sized batches: vLLM's fused_moe
get_default_config (vllm/model_executor/layers/fused_moe/fused_moe.py) uses BLOCK_SIZE_M = 64
for fp8 block-quantized weights beyond 64 tokens and for other dtypes when tokens M > E;
SGLang's copy of the kernel does the same. moe_align_block_size pads every expert's rows to a
multiple of it, so each touched expert computes whole tiles."""
GROUPED_SMALL_TILE_ROWS = 16.0
"""The same heuristic's tile for decode-sized batches (M <= E: BLOCK_SIZE_M = 16)."""
GROUPED_KERNEL_FRACTION = 0.4
"""What a fused MoE layer (gather rows by expert, gate/up GEMM, activation, down GEMM, scatter)
reaches of the dense-GEMM rate at the same rows and depths. VeOmni PR #460 (ByteDance-Seed,
H100 bf16, 32768 tokens) measures Triton fused MoE at 215, 71 and 283 TFLOP/s and
torch._grouped_mm (CUTLASS) at 242 and 181 TFLOP/s for (D, F, E, k) = (2048, 768, 128, 8),
(2048, 512, 512, 10), (4096, 1024, 128, 8); this module's law without the fraction gives 555,
488 and 635 TFLOP/s there: ratios 0.39, 0.44, 0.15, 0.37, 0.45, median 0.39. vLLM PR #13932
(H100, DeepSeek-V3 fp8 experts, benchmark_moe.py) agrees in kind: Triton and DeepGEMM fused MoE
at 3072 tokens, TP1, take 27.2 and 11.3 ms, 80 and 192 TFLOP/s. Taken as a property of the
kernel family on every GPU and dtype (an assumption: the measurements are Hopper bf16/fp8);
DeepGEMM's README reaches 0.66 of peak only with 8192 rows per group and no routing."""


def grouped_gemm_efficiency(eff, rows, k: int):
    """Fraction of peak of the routed-expert GEMM when each touched expert computes `rows` token
    rows on average, padded to whole tiles of b rows:
        e = gemm_max * r / max(b, r + b/2)
    (a touched expert with fewer than b rows computes one full tile; beyond, the last tile is
    on average half empty), never above the dense law e_gemm(r), times the fused kernel's
    GROUPED_KERNEL_FRACTION. b = GROUPED_SMALL_TILE_ROWS while r <= k (M <= E tokens, where
    r ~ M*k/E), else GROUPED_TILE_ROWS.
    Worked number: Qwen3.5-397B (E=512, k=10) on an 8192-token prompt: r = 160 rows,
    e = 0.4 * 0.75 * 160/192 = 0.25 (the dense law alone: 0.75 * 160/176 = 0.68)."""
    r = np.maximum(np.asarray(rows, dtype=float), 1.0)
    b = np.where(r <= k, GROUPED_SMALL_TILE_ROWS, GROUPED_TILE_ROWS)
    padded = eff.gemm_max * r / np.maximum(b, r + b / 2)
    return np.minimum(eff.gemm(r), padded) * GROUPED_KERNEL_FRACTION


# ----------------------------------------------------------------------------- weight streaming

SGLANG_FUSED_MOE_STREAM_FRACTION = 0.79
"""Rate at which SGLang's Triton fused_moe kernel (fp8 w8a8, 128x128 block scales, its default
config) streams the touched experts' weights at decode, relative to this model's dense-GEMM
streaming rate (HBM fraction x quant_kernel_efficiency). sgl-project/sglang PR #11730 (H200,
Qwen3-235B-A22B fp8, TP8: E=128, k=8, D=4096, F/8=192; tuning_fused_moe_triton.py without the
tuned config) times the whole fused_moe call at 31.70 us for 1 token and 124.99 us for 32:
93.3 us for the 103 experts the extra 31 tokens touch (128*(1-(1-8/128)^32) = 111 against
8), 0.91 us per touched expert, whose 2.36 MB slice then streams at 2.6 TB/s, 0.54 of the
H200's 4.8 TB/s. This model without the fraction prices the same MoE block (experts, routing,
permute, combine, activation) 73.7 us apart, so 73.7 / 93.3 = 0.79. Why: a grouped kernel's
CTAs each stream one tile of one small expert slice, and the down projection's tiles reduce
over F/tp = 192 rows (1.5 BLOCK_K iterations), too short to fill the load pipeline.
A property of the kernel family, so it is set on the engine whose default MoE kernel it is and
taken for its MoE layers in every dtype (an assumption: the measurement is its fp8 kernel on
Hopper); the other presets keep 1 (their default MoE kernels on the measured GPUs, FlashInfer/
TRT-LLM CUTLASS and trtllm-gen on Blackwell, Marlin for int4, were not measured here)."""

"""Reduction depth of the routed-expert GEMMs: why thin expert shards run below a dense GEMM's rate.

A tiled GEMM computes each [tile_M x tile_N] output tile in K / tile_K main-loop iterations;
filling the pipeline, promoting the fp8 block scales and storing the tile cost a fixed amount
per tile, so the achieved fraction of peak grows with the reduction depth K as K / (K + K_HALF).
Measured on the fused MoE kernel itself (calibrate/MOE_PREFILL_NOTES.md: vLLM's Triton
fused_moe, fp8 with 128x128 block scales, one H200, 12 expert shards of six catalog MoE models
x 1k-16k prompt tokens, calibrate/data/moe-prefill-h200-sxm-20261201.json): the down projection
over K = 192, 256, 384, 768, 1024, 1536, 2048 runs at 0.32, 0.39, 0.50, 0.73, 0.78, 0.86, 0.86
of the rate of its gate/up projection (K = 3072-7168) at the same rows; least squares over all
98 points with >= 64 rows per expert (calibrate/fit_moe_prefill.py) gives K_HALF = 430, about
3.5 of the kernel's 128-deep K steps. A dense kernel family needs deeper K: DeepGEMM's README
(H800, fp8 1x128/128x128 scaling, M = 4096) fits K_HALF = 720 (K = 512, 1536, 2048, 7168, 16384:
590, 990, 1025, 1304, 1358 TFLOP/s).

The vendor gemm_max (core/efficiency.py) was measured on dense layer shapes with K >= 4096
(calibrate/BENCH_NOTES.md: Llama-8B qkv, gate_up with K = 4096 and down with K = 14336), so
the depth factor is taken relative to DEPTH_REF_K and never exceeds 1: dense GEMMs keep their
rate. Where it bites is the routed experts under tensor parallelism: each expert's FFN width
F is split over the moe_tp = tp*dp/ep GPUs that hold a slice of it, and the down projection
reduces over that slice, K = F / moe_tp (SGLang/vLLM fused_moe and TRT-LLM's MoE plugin
shard the intermediate dimension; DeepSeek-V3 at TP8: 2048 / 8 = 256). Its gate/up
projections reduce over d_model and keep their rate.

The expert law above is applied to the "experts" op only. Dense row-parallel TP shards have
their own, measured, law (shard_depth_factor): o_proj and mlp_down of a dense layer reduce
over K/tp on each rank (Megatron-LM row-parallel linears; vLLM RowParallelLinear, TensorRT-LLM
Linear with TensorParallelMode.ROW), and the same fixed per-tile cost makes them slower per
FLOP than the unsharded layer the GEMM curve was measured on.
"""

from __future__ import annotations

import numpy as np

from perfmodel.core.efficiency_spec import HOPPER_GROUPED_KERNEL_FRACTION
from perfmodel.core.specs import Deployment, ModelSpec

DEPTH_HALF_K = 430.0
"""K at which the fused MoE GEMM reaches half its deep-K rate (fit to the H200 measurement of
vLLM's Triton fused_moe, above; calibrate/fit_moe_prefill.py)."""
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
    r(256) = (256/686) / (4096/4526) = 0.412, factor = 2/3 + 1/3 / 0.412 = 1.48."""
    if m.moe is None:
        return 1.0
    up = 2 if m.gated_mlp else 1
    width = m.moe.expert_ffn_dim / moe_tp(dep)           # K of the down projection per GPU
    return (up / (up + 1) / depth_efficiency(m.d_model)
            + 1 / (up + 1) / depth_efficiency(width))


def shard_depth_factor(k_half: float, k: float, split: float) -> float:
    """Compute-time multiplier (>= 1) of a row-parallel TP shard reducing over k / split of its
    layer's k, against the unsharded layer the GEMM curve prices:
        (1 + k_half * split / k) / (1 + k_half / k)      (1 when split <= 1, k or k_half 0).
    k_half from Efficiency.shard_depth_half_k: on one H200 (cuBLASLt through torch,
    calibrate/bench_tp_shards.py, calibrate/data/tp-shards-h200-sxm.json) the o_proj and
    mlp_down shards of Llama-3.1-70B and Qwen3-32B at tp 1, 2, 4, 8 (K 1024-28672, M 1k-16k,
    timed back to back) fit rate ~ K / (K + k_half) with k_half 790 (fp8 per-tensor) and 330
    (bf16). Worked number, Llama-3.1-70B o_proj (k = 8192) at tp 8, fp8:
    (1 + 790 * 8 / 8192) / (1 + 790 / 8192) = 1.771 / 1.096 = 1.615 (measured 1.36-1.68 over
    M = 2k-16k)."""
    if split <= 1.0 or k <= 0.0 or k_half <= 0.0:
        return 1.0
    return (1.0 + k_half * split / k) / (1.0 + k_half / k)


# ----------------------------------------------------------------------------- tile padding

GROUPED_TILE_ROWS = 64.0
"""Rows of one tile of the grouped expert GEMM at prompt-sized batches: vLLM's fused_moe
get_default_config (vllm/model_executor/layers/fused_moe/fused_moe.py) uses BLOCK_SIZE_M = 64
for fp8 block-quantized weights beyond 64 tokens and for other dtypes when tokens M > E;
SGLang's copy of the kernel does the same. moe_align_block_size pads every expert's rows to a
multiple of it, so each touched expert computes whole tiles."""
GROUPED_SMALL_TILE_ROWS = 16.0
"""The same heuristic's tile for decode-sized batches (M <= E: BLOCK_SIZE_M = 16)."""
GROUPED_KERNEL_FRACTION = HOPPER_GROUPED_KERNEL_FRACTION
"""What the fused MoE GEMM (rows gathered by expert, padded to whole tiles) reaches of the dense
GEMM's gemm_max, once its tile padding and reduction depth are priced. Measured on one H200
(calibrate/MOE_PREFILL_NOTES.md, calibrate/data/moe-prefill-h200-sxm-20261201.json): a
vLLM-style Triton fused_moe kernel (fp8 e4m3, 1x128 / 128x128 block scales, vLLM's default config:
64x128x128 tiles, 4 warps, 3 stages) over the routed-expert shards of MiniMax-M2.5,
Qwen3-235B-A22B, Qwen3.5-397B-A17B, DeepSeek-V3, Kimi-K2.5 and GLM-5 at tp2-8 / ep4-8 and
1k-16k prompt tokens (uniform random top-k routing); least squares on log time with DEPTH_HALF_K
over the 98 points with >= 64 rows per expert: 0.465 (x the block-scaled fp8 gemm_max 0.671 =
0.31 of the fp8 peak at full tiles and deep K: ~610 TFLOP/s, against 1300 for one dense fp8
GEMM of the same rows); median |error| 5%, max 27%, every prompt size's median within 7%.
The same law predicts the kernel at 32-512 tokens at 0.87-0.94 of its time (median per size; the weight
stream bounds it there: calibrate/data/moe-decode-h200-sxm-20261201.json) and VeOmni PR #460's H100
bf16 Triton fused MoE at (D, F, E, k) = (4096, 1024, 128, 8), 32768 tokens: 313 against 283
TFLOP/s measured. Taken for every GPU and dtype but datacenter Blackwell, whose MoE kernels
reach a smaller fraction of their 2.3x larger peak (Efficiency.grouped_kernel_fraction,
core/efficiency.py BLACKWELL_GROUPED_KERNEL_FRACTION; an assumption elsewhere: the
measurements are Hopper fp8 and bf16). The law before this measurement
(0.4 x the lower of the dense curve e_gemm(r) and the padded tile) priced these GEMMs 1.5-3.6x
slower than measured (median 1.6-2.6x per prompt size)."""


ROUNDING = 1e-9
"""Relative slack on the M = E bound, so the op list's r(E) (numpy's power) is never read as
past it; r(E + 1) is above r(E) by ~0.4/E relative, far more."""


def small_tile_max_rows(k: int, num_experts: int = 0) -> float:
    """Rows per touched expert at M = E tokens, the last batch the grouped kernel runs with its
    small tile (vLLM get_default_config: BLOCK_SIZE_M = 16 while M <= E). Each of the M tokens
    is routed to k of E experts, so the batch touches E * (1 - (1 - k/E)^M) of them
    (core/ops_ffn.py expected_experts) and computes r(M) = M*k / that many rows on each; r(M)
    rises with M (the touched count is concave), so r <= r(E) is exactly M <= E. Without E
    (num_experts 0) the many-expert limit r(E) -> k / (1 - e^-k) ~ k is taken as k.
    Worked number, Mixtral-8x7B (E = 8, k = 2): 8 tokens touch 8 * (1 - 0.75^8) = 7.20 experts,
    r(8) = 16 / 7.20 = 2.22 rows (the rule r <= k before it switched tiles at M = 7 tokens)."""
    if num_experts <= 0:
        return float(k)
    touched = num_experts * (1.0 - (1.0 - k / num_experts) ** num_experts)
    return k * num_experts / touched * (1.0 + ROUNDING)


def grouped_gemm_efficiency(eff, rows, k: int, num_experts: int = 0):
    """Fraction of peak of the routed-expert GEMM when each touched expert computes `rows` token
    rows on average, padded to whole tiles of b rows:
        e = f * gemm_max * r / max(b, r + b/2),   f = eff.grouped_kernel_fraction
    (gemm_max: eff.grouped_gemm_max where set, else the GEMM curve's)
    (GROUPED_KERNEL_FRACTION but on datacenter Blackwell; a touched expert with fewer than b
    rows computes one full tile; beyond, the last tile is on average half empty).
    b = GROUPED_SMALL_TILE_ROWS while M <= E tokens (r <= small_tile_max_rows(k, E)), else
    GROUPED_TILE_ROWS. The reduction depth is expert_depth_factor's.
    Worked number: Qwen3.5-397B (E=512, k=10) on an 8192-token prompt, H100 bf16: r = 160 rows,
    e = 0.465 * 0.75 * 160/192 = 0.29."""
    r = np.maximum(np.asarray(rows, dtype=float), 1.0)
    b = np.where(r <= small_tile_max_rows(k, num_experts), GROUPED_SMALL_TILE_ROWS,
                 GROUPED_TILE_ROWS)
    base = eff.grouped_gemm_max if eff.grouped_gemm_max is not None else eff.gemm_max
    return eff.grouped_kernel_fraction * base * r / np.maximum(b, r + b / 2)


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

"""Default efficiencies: honest mid-range fractions of the datasheet, per vendor and
memory type, replaceable by a calibrated profile (calibrate/profiles/*.yaml).

Where the numbers come from (mid-range of published measurements, not tuned to any row
of the validation table):
- Memory bandwidth actually streamed by inference kernels: 75-90% of peak on HBM
  (NVIDIA "Mastering LLM techniques: inference optimization" blog; gpt-fast README
  reports ~0.7-0.8 MBU at batch 1; STREAM-like copies on H100/H200 reach ~0.9);
  GDDR6X cards stream ~85-90% (RTX 4090 copy benchmarks); AMD MI300X reaches ~0.7-0.8
  of peak in practice (SemiAnalysis MI300X vs H100 study, 2024); Apple unified memory
  ~0.7-0.8 (llama.cpp Apple-silicon discussion #4167).
- GEMM rows: efficiency e(M) = gemm_max*M/(M+half_m), i.e. compute as if M were padded by
  half_m rows (tensor-core tiles are 16-64 rows; GEMV kernels handle M<16);
- Large-M GEMM: cuBLAS bf16 on H100/H200 reaches ~75-80% of dense peak (measured here,
  calibrate/BENCH_NOTES.md; NVIDIA cuBLAS perf blog); AMD MI300X hipBLASLt ~45-60%
  (SemiAnalysis 2024); TPU MXU ~80% (scaling-book); Apple GPU ~60%.
- GEMM per dtype on Hopper (HOPPER_GEMM_BY_DTYPE): measured on an H200 SXM
  (calibrate/bench_gemm_dtype.py, calibrate/data/gemm-dtype-h200-sxm-20261201.json; table and
  fit in calibrate/GEMM_DTYPE_NOTES.md): fp8 GEMMs reach a smaller fraction of their
  (2x) peak than bf16 and need more rows to get there; block-scaled fp8 (DeepSeek-V3 recipe,
  1x128 activation / 128x128 weight scales) less again. bf16 keeps gemm_max/gemm_half_m above.
- Attention: FlashAttention-2 reaches ~50-70% of peak on A100/H100 forward (Dao 2023);
  decode attention streams the KV cache at ~80-90% of achievable bandwidth.
- Kernel floor: an empty CUDA kernel occupies the GPU ~2-4 us (launch latency and tail;
  CUDA graphs paper/blog, PyTorch CUDA graphs blog 2021).
- Collective links: NCCL all-reduce bus bandwidth ~70-80% of NVLink peak (nccl-tests).
- AMD ROCm stacks (vLLM/SGLang on MI300X/MI325X), relative to the NVIDIA stack on the same
  workload: a single-GPU MI300X vs H200 study with one vLLM version on both
  (github.com/alpharomercoma/MI300X-vs-H200, REPORT.md) measures dense 70B FP8 single-stream
  decode 1.12x faster on the H200 although the MI300X has 1.10x its bandwidth: the ROCm stack
  streams 1/(1.12*1.10) = 0.81 of what the CUDA stack achieves (the mem factor); an 8B
  prefill-heavy load at concurrency 256 runs 2.06x faster on the H200 with 1.32x less peak,
  i.e. ~0.37 of NVIDIA's achieved compute fraction end to end. GEMM alone does better:
  SemiAnalysis (Dec 2024, "MI300X vs H100 vs H200 benchmark part 1") measures hipBLASLt BF16
  near 0.45-0.5 of the 1307 TFLOP/s peak on large shapes, less on serving shapes: gemm_max 0.40,
  attention (CK/Triton flash kernels) 0.30. Cross-check: AMD's published vLLM throughput for
  Llama-3.1-70B FP8 on 8x MI300X (amd.com ROCm AI performance results, vLLM 0.9.0.1:
  16,581 tok/s at 128/2048, 8,353 at 2048/2048) against our 19.7K and 10.5K output tok/s.
  Where AMD's own kernel tables give a chip's fp8 GEMM rate (MI355X fp8, MI300X/MI325X/MI355X
  fp8_block), those curves replace gemm_max/half_m for that kind (core/efficiency_amd.py).
"""

from __future__ import annotations

from perfmodel.core.efficiency_amd import AMD_GEMM_BY_DTYPE, AMD_GROUPED_GEMM_MAX
from perfmodel.core.efficiency_spec import HOPPER_GROUPED_KERNEL_FRACTION
from perfmodel.core.ops_linear import GDN_CHUNK_EFF_MAX
from perfmodel.core.specs import Efficiency, GemmCurve, HardwareSpec
from perfmodel.core.units import TERA

# achieved / peak streaming bandwidth by memory technology
MEM_BW_BY_MEMORY = {
    "hbm2": 0.80, "hbm2e": 0.82, "hbm3": 0.82, "hbm3e": 0.82,
    "gddr6": 0.85, "gddr6x": 0.87, "gddr7": 0.85,
    "lpddr5": 0.75, "lpddr5x": 0.75, "unified": 0.75,
}

# vendor-level factors: software-stack maturity on top of the memory technology
VENDOR = {
    #          mem factor, gemm_max, gemm_half_m, attn_compute, kernel_s, link
    "nvidia": (1.00, 0.75, 16.0, 0.50, 2.5e-6, 0.75),
    "amd":    (0.81, 0.40, 32.0, 0.30, 4.0e-6, 0.65),   # ROCm: see the docstring
    "intel":  (0.90, 0.65, 32.0, 0.40, 4.0e-6, 0.70),
    "google": (0.95, 0.80, 32.0, 0.50, 3.0e-6, 0.75),
    "apple":  (0.95, 0.60, 16.0, 0.40, 8.0e-6, 0.60),
}


HOPPER_GPUS = frozenset({"h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h800", "h20", "gh200"})
"""NVIDIA Hopper (sm_90) chips: one tensor-core generation and one cuBLAS/CUTLASS kernel set, so
the H200 GEMM measurement below is taken for all of them (an assumption for the cut-down parts)."""

_H200_GEMM = ("calibrate/data/gemm-dtype-h200-sxm-20261201.json (H200 SXM, torch 2.11 cu130, "
              "cuBLASLt via torch._scaled_mm; 19 layer shapes of Llama-3.1-8B/70B, Qwen3-32B, "
              "DeepSeek-V3; M 128-16384; fit: calibrate/fit_gemm_dtype.py)")
HOPPER_GEMM_BY_DTYPE = {
    # fp8 e4m3, per-tensor scales: 1360-1420 TFLOP/s (0.69-0.72 of 1979) at M >= 1024,
    # 1076 at M = 256; fit 0.735 / 86.5 rows (a repeat on 8 shapes: 0.745 / 92)
    "fp8": GemmCurve(gemm_max=0.735, gemm_half_m=86.5, source="fp8 per-tensor: " + _H200_GEMM),
    # fp8 with 1x128 / 128x128 block scales: 1275-1293 TFLOP/s (0.65) at M >= 2048, 855 at
    # M = 256; fit 0.671 / 151.5 (repeat: 0.688 / 164). Row-wise scaling lies between
    # (0.713 / 153) and is not a kind of its own.
    "fp8_block": GemmCurve(gemm_max=0.671, gemm_half_m=151.5,
                           source="fp8 1x128x128x128 block scales: " + _H200_GEMM),
    # fp32 (no TF32: torch's default matmul precision, which vLLM keeps) MoE router GEMMs
    # (MoESpec.router_fp32; their bf16 -> fp32 upcast is an op of its own, ops.py):
    # calibrate/data/router-gemm-h200-sxm-20261202.json (calibrate/bench_router_gemm.py), the
    # GEMM alone of MiniMax-M2 (M x 3072 @ 3072 x 256) and GLM-4.5 (M x 5120 @ 5120 x 160):
    # 0.52-0.76 and 0.45-0.55 of the 66.9 TFLOP/s fp32 peak at M = 1024..16384; least squares
    # on log time of the priced op (this curve, capped by the GEMV path, _gemm_compute_s) over
    # both at M >= 1024: 0.665 / 310 rows (MiniMax 1.07-1.17x, GLM 0.84-0.93x). Below 1024 rows
    # the GEMV path prices them 0.3-0.7x (14-25 us measured at 64-256 rows). Kept to routers
    # (roofline.router_dtype): other fp32 GEMMs keep the vendor default.
    "fp32_router": GemmCurve(gemm_max=0.665, gemm_half_m=310.0,
                             source="fp32 router GEMMs, MiniMax-M2 and GLM-4.5 shapes: "
                                    "calibrate/data/router-gemm-h200-sxm-20261202.json "
                                    "(calibrate/bench_router_gemm.py)"),
}


HOPPER_SHARD_DEPTH_HALF_K = (("fp8", 790.0), ("bf16", 330.0))
"""K_half of row-parallel TP shards (Efficiency.shard_depth_half_k, core/grouped_gemm.py
shard_depth_factor) on Hopper: one H200, cuBLASLt through torch 2.11 (F.linear for bf16,
torch._scaled_mm with per-tensor scales for fp8), o_proj and mlp_down of Llama-3.1-70B and
Qwen3-32B at tp 1, 2, 4, 8 (K 1024-28672) and M = 1k-16k, the four shards of a layer timed back
to back (calibrate/bench_tp_shards.py, calibrate/data/tp-shards-h200-sxm.json). Least squares on
log rate, rate = A(model, layer, M) * K / (K + K_half): fp8 790 (rms 0.07 in log), bf16 330
(0.04). At tp 8, M = 4096, fp8: o_proj (K = 1024) 926 / 900 TFLOP/s against 1357 / 1417 at
tp 1 (Llama / Qwen), mlp_down (K = 3584 / 3200) 1195 / 1088 against 1374 / 1330. Only the
measured kinds: fp8 block scales, int8 and weight-only kernels keep their rate. The
column-parallel shards (qkv, gate_up: N / tp) measured 0.88-0.95 of their unsharded rate at
tp 8 and M = 4096 but 0.58-1.07 across M with no law, and are not priced."""


BLACKWELL_DC_GPUS = frozenset({"b100", "b200", "b300", "gb200", "gb300"})
"""NVIDIA datacenter Blackwell (sm_100/sm_103): one tensor-core generation and one family of MoE
kernels (FlashInfer/TRT-LLM CUTLASS and trtllm-gen grouped GEMMs, CuTe DSL); the workstation
parts (sm_120: RTX 5090, RTX PRO 6000, GB10) have other kernels and keep the Hopper law."""

_B200_VLLM_BENCH = ("vLLM benchmarks/kernels/bench_{}_gemm.py on one B200, Llama-3.1-8B layer "
                    "shapes (K 4096), TFLOP/s tables in vllm-project/vllm PR {}")
BLACKWELL_GEMM_BY_DTYPE = {
    # fp8 e4m3 per-tensor scales, vLLM's CUTLASS sm100 cutlass_scaled_mm after its tunings for
    # M >= 128 (PR #19566, 2025-06; the `fp8-tensor-w-tensor-a-noquant` column: the GEMM alone,
    # activation quantization is an op of its own here, core/act_quant.py): N=4096 K=4096 611,
    # 993, 1832, 2077 TFLOP/s at M = 128, 256, 512, 1024; N=6144 K=4096 1020, 1362 at 128, 256
    # and 2545 at 16384; the run's third table 1226, 1914, 2295, 2514, 2767, 2533 at M = 128 ..
    # 4096: 0.45-0.61 of the 4500 dense peak from M = 512. Least squares on log time over the
    # 13 points: 0.636 / 266 rows (rms 0.21 in log; the 0.75 / 16 vendor default priced them
    # 1.2-2.1x too fast).
    "fp8": GemmCurve(gemm_max=0.583, gemm_half_m=128.0,
                     source="fp8 per-tensor CUTLASS sm100: " + _B200_VLLM_BENCH.format("fp8", "#19566")),
    # NVFP4 (fp4 e2m1, 16-element block scales), vLLM's CUTLASS nvfp4 GEMM (PR #20646, 2025-07,
    # its "Before" table, `nvfp4-noquant`), N=6144 K=4096: 550, 1102, 2188, 2895, 3411, 3646,
    # 3779, 3904 TFLOP/s at M = 128 .. 16384: 0.24-0.43 of the 9000 dense peak; fit 0.490 / 739
    # (rms 0.11). The PR's own tuned configs ("a starting point"), and FlashInfer's CUTLASS fp4
    # GEMM on B200 (flashinfer-ai/flashinfer#1732, 2025-09: "not approaching the hardware limit")
    # say the kernels of that summer stayed well below the fp4 peak.
    "fp4": GemmCurve(gemm_max=0.389, gemm_half_m=128.0,
                     source="NVFP4 CUTLASS sm100: " + _B200_VLLM_BENCH.format("nvfp4", "#20646")),
    # bf16 (torch.matmul, cuBLAS) in the same two runs: 729, 1127, 1284, 1326, 1355, 1365, 1421,
    # 1360 TFLOP/s at M = 128 .. 16384 (N=6144, #20646) and 1513 at 16384 (#19566): 0.57-0.67 of
    # the 2250 peak; fit 0.646 / 107 (rms 0.06).
    "bf16": GemmCurve(gemm_max=0.630, gemm_half_m=60.0,
                      source="bf16 torch.matmul (cuBLAS): " + _B200_VLLM_BENCH.format("fp8/nvfp4",
                                                                                     "#19566, #20646")),
}
"""GEMM curves of datacenter Blackwell (BLACKWELL_DC_GPUS) per matmul kind, from vLLM's own B200
kernel benchmarks (no B200 of our own): its GEMMs reach a smaller fraction of the 2x larger
tensor-core peak than Hopper's do of theirs (HOPPER_GEMM_BY_DTYPE: fp8 0.735 / 86 rows), and
need more rows to get there (256-row 2-SM tiles). fp8_block (1x128 / 128x128 block scales) falls
back to the fp8 curve (GEMM_KIND_FALLBACK), checked against one block-fp8 kernel SGLang runs on
sm100, DeepGEMM (SGLANG_ENABLE_JIT_DEEPGEMM, on by default; UE8M0 scales on the block-scaled MMA,
deepseek-ai/DeepGEMM PR #112): sgl-project/sglang PR #13528 (2025-11-18, one GB200,
benchmark/kernels/deepseek/benchmark_deepgemm_fp8_gemm_blackwell.py) times N=24576 K=7168 at
146 / 260 us for M = 1024 / 2048, 2471 / 2775 TFLOP/s, where this curve gives 2591 / 2744 on the
GB200 (5000 peak): 0.95 / 1.01. Kept, not fitted (one shape, two prompt sizes; the smaller
shapes of that table sit on a ~60 us host floor). The same table's FlashInfer column is another
kernel: gemm_fp8_nt_groupwise backend "trtllm", which SGLANG_ENABLE_FLASHINFER_GEMM=1 selects
for every block-fp8 linear (sglang fp8_utils.dispatch_w8a8_block_fp8_linear), 826 / 1633 us
there (437 / 442 TFLOP/s, 0.09 of peak); its CUTLASS backend ran at 0.58-0.97x fp16 torch linear
on a B200 (flashinfer-ai/flashinfer#2146, NVIDIA/cutlass#2923). Not encoded: which of the two
the B200 SGLang 0.5.9 Qwen3.5 rows ran is not pinned (InferenceX PR #804 names the flag, the
stored qwen3.5_fp8_b200.sh turns it off), and on those rows that rate explains a third of the
prompt-rate excess while lengthening TPOT (docs/fp8_block.md section 5).
Assumption: B300/GB200/GB300 take the B200 curves (same sm_100 kernels)."""

BLACKWELL_FA2_ATTN_COMPUTE = 0.155
"""Efficiency.attn_compute_fa2 on datacenter Blackwell: FlashAttention-2-class prefill kernels
(warp-level mma.sync; no tcgen05 path) reach about a sixth of the 2250 TFLOP/s bf16 peak:
"FA2 has no tcgen05 path and measures at ~320-390 TFLOPS, roughly 17% of B200 bf16 peak"
(flashinfer-ai/flashinfer PR #5133, FlashInfer's fa2 backend, which its `auto` picks on sm100
for ragged and paged prefill); flash-attn 2.7.4 forward on a B200, 307-381 TFLOP/s at
sequence lengths 512-16384 (Dao-AILab/flash-attention#1589). 355 / 2250 = 0.155, their middle.
Cross-check against the native (tcgen05) kernels the vendor default attn_compute 0.5 prices:
TRT-LLM-gen prefill attention ran 2.3-3.3x faster than FlashInfer's native prefill in vLLM's
B200 kernel benchmark (vllm-project/vllm PR #25998, speedup_% 0.57-0.70), i.e. at 0.36-0.51."""

# The chunked Gated DeltaNet prompt kernels (flash-linear-attention's Triton
# chunk_gated_delta_rule, which SGLang and vLLM vendor and run for prompts on sm100 until their
# FlashInfer/CuTe DSL paths) take the same time on a B200 as on the H200, where the time fit of
# core/ops_linear.py was measured: flashinfer-ai/flashinfer PR #3001 (2026-04, B200, FLA 0.4.2,
# Triton 3.5.1, Qwen3.5-397B heads) times FLA's chunk_gated_delta_rule_fwd at 338 us (TP8, 2 key
# / 8 value heads) and 424 us (TP4, 4 / 16) for one 8192-token prompt; the same function in
# calibrate/data/gdn-prefill-h200-sxm-20261202.json ("core") takes 345 / 442 us on one H200.
# The kernels are scan- and latency-bound (a sequential pass over 64-token chunks, a grid of
# sequences x heads), so the 2.3x larger tensor-core peak does not shorten them. The same table
# on one GB200 (vllm-project/vllm PR #40717): 438 / 414 us. Only the 8192-token rows are used:
# the shorter ones sit on a ~0.21 ms (B200) / ~0.36 ms (GB200) floor at every size, which is
# the host issuing the launches of back-to-back eager calls (event timing, no CUDA graph:
# benchmarks/bench_blackwell_gdn_prefill.py), already priced as GDN_PREFILL_ISSUE_S.
H200_BF16_PEAK_FLOPS = 989.4 * TERA       # hardware_db/h200-sxm.yaml, dense bf16
B200_BF16_PEAK_FLOPS = 2250.0 * TERA      # hardware_db/b200.yaml, dense bf16
GDN_CHUNK_H200_S = (345e-6, 442e-6)       # the H200 run's "core", 1 x 8192 at TP8, TP4
GDN_CHUNK_B200_S = (338e-6, 424e-6)       # flashinfer PR #3001's FLA column, the same shapes
BLACKWELL_GDN_CHUNK_EFF_MAX = (GDN_CHUNK_EFF_MAX * H200_BF16_PEAK_FLOPS / B200_BF16_PEAK_FLOPS
                               * sum(GDN_CHUNK_H200_S) / sum(GDN_CHUNK_B200_S))
"""Efficiency.linear_attn_chunk_max on datacenter Blackwell: the H200 curve's ceiling (0.054)
rescaled so that the B200 runs the chunked prompt path in the time the two published 8192-token
rows give (0.97x the H200's): 0.054 x 989.4 / 2250 x 787 / 762 = 0.0245 of the B200 peak.
Assumption: the rest of the layer (causal conv, gating, gated norm: 20% of the H200 layer at
8192 tokens) keeps that ratio too, and B300/GB200/GB300 take the B200 value."""

BLACKWELL_GROUPED_GEMM_MAX = 0.75
"""Efficiency.grouped_gemm_max on datacenter Blackwell: BLACKWELL_GROUPED_KERNEL_FRACTION below
was solved against the vendor gemm_max 0.75, not the per-dtype curves above, so the fused-MoE
law keeps that base."""

BLACKWELL_GROUPED_KERNEL_FRACTION = 0.25
"""Efficiency.grouped_kernel_fraction on datacenter Blackwell: the fused MoE GEMMs reach a much
smaller fraction of Blackwell's 2.3x larger peak than vLLM's Triton kernel does of Hopper's
(HOPPER_GROUPED_KERNEL_FRACTION 0.465). What each published measurement implies, solving the
model's own grouped-GEMM law (core/grouped_gemm.py, at the card's peak, gemm_max 0.75, depth
law and weight stream; calibrate/fit_moe_blackwell.py) for the fraction that gives the
measured time; 512 rows per expert unless noted:
- flashinfer PR #5301 (benchmarks/bench_moe_deepseek.py; one B300 SXM6, CUDA 13.2): TRT-LLM
  NVFP4 MoE (trtllm-gen), DeepSeek-V3 shard of EP8 (32 of 256 experts, D 7168, F 2048, k 8):
  16384 tokens 0.6226 ms (2318 TFLOP/s) -> 0.25; 8192 tokens (256 rows) 0.3855 ms -> 0.22;
  the 8192 extra tokens alone (0.2371 ms, fixed routing/launch costs cancel) -> 0.31.
- "TFLOPS Gap: Why FP4 MoE Kernel Engineering Matters on Blackwell" (Hugging Face blog, one
  B200): NVFP4 grouped MoE, E 32, k 4, D 2880, F 7680, 4096 tokens: SGLang 1262, FlashInfer
  CuTe DSL 1225, vLLM 1117 TFLOP/s -> 0.20, 0.20, 0.18.
The timed calls include routing, activation quantization and the finalize sum, which the model
prices as ops of their own, so the whole-call values (0.18-0.25) are lower bounds and the
marginal 0.31 an upper one: 0.25, their middle (0.19 of the fp4 peak at full tiles and deep
K, against 0.31 of the fp8 peak on the H200). Taken for every dtype (an assumption: the
sources are NVFP4). The one fp8 grouped time at prompt sizes found is another kernel family:
DeepGEMM's m-grouped contiguous fp8 GEMM (128x128 blocks, UE8M0) on one B300, DeepSeek-V3 EP8
shard (32 experts, gate/up N 4096 K 7168, down N 7168 K 2048), 512 rows per expert: 387 / 206 us
(vincentzed/deepgemm-swapab-bench logs/fp8.log, CUPTI, cold L2), 0.55-0.73 of the 4500 peak
(valid 16384 to padded 21600 rows) against this law's 0.18; SGLang runs it only with
--moe-runner-backend deep_gemm or DeepEP. For fp8 models outside the DeepSeek family SGLang's
`auto` MoE runner is Triton in a TP-only run, flashinfer_trtllm only when the flag is passed
(sgl-project/sglang PR #38374); no Blackwell time of either at prompt sizes was found, so
neither is encoded (docs/fp8_block.md)."""


SUSTAINED_CLOCK_FRACTION = 0.85
"""SM-bound throughput of NVIDIA datacenter Hopper and Blackwell chips under sustained load over
their burst rate (Efficiency.sustained_clock_fraction). The GEMM, attention and MoE rates above
were timed in bursts (calibrate/bench_timing.py: a short GPU sleep before each timed batch;
vLLM/FlashInfer kernel benchmarks: ~100 ms), at the boost clock; a serving engine keeps the
card busy and its power cap lowers the SM clock.
- H200 SXM (700 W), calibrate/bench_sustained.py, calibrate/data/sustained-h200-sxm-20261202.json
  (calibrate/SUSTAINED_NOTES.md): bf16 8192^3 GEMM 782 TFLOP/s burst -> 664 sustained (0.848),
  fp8 1413 -> 1207 (0.854), bf16 M=4096 784 -> 678 (0.865), causal flash attention 643 -> 542
  (0.843); prompt GEMMs interleaved with decode GEMMs (80 % of the time) 0.872. nvidia-smi:
  "SW power cap" active, SM clock 1320-1515 MHz against 1980 MHz in a burst, memory clock 3201
  MHz throughout; a memory-bound copy streams as fast sustained as in a burst (1.01). The
  clock falls within 50-100 ms of the first back-to-back GEMM.
- B200 (1000 W), flashinfer-ai/flashinfer PR #2899 (2026-03): back-to-back FlashAttention-4
  bf16 prefill, 1450 TFLOP/s at its peak -> 1237 fully throttled (0.853), SM clock 1965 -> ~1580
  MHz at ~1000 W.
0.85, the middle of these. Applied to the compute term of every op (tensor and vector units,
roofline.step_time); memory, link and launch times are unchanged. Other chips: no measurement,
so their burst rates stand (1.0): the AMD vendor factors already come from end-to-end serving
comparisons (module docstring), and consumer parts were not measured."""


def sustained_clock_fraction(hw: HardwareSpec, eff: Efficiency) -> float:
    """The SM-bound throughput fraction a step is priced at (Efficiency.sustained_clock_fraction,
    else SUSTAINED_CLOCK_FRACTION on NVIDIA datacenter Hopper/Blackwell, else 1.0)."""
    if eff.sustained_clock_fraction is not None:
        return eff.sustained_clock_fraction
    return SUSTAINED_CLOCK_FRACTION if hw.id in HOPPER_GPUS | BLACKWELL_DC_GPUS else 1.0


def burst(eff: Efficiency) -> Efficiency:
    """`eff` priced at the burst clock its rates were measured at: what a microbenchmark that
    idles before each timed batch sees (calibration points, kernel runs)."""
    return eff.model_copy(update={"sustained_clock_fraction": 1.0})


def default_efficiency(hw: HardwareSpec) -> Efficiency:
    """Mid-range defaults for this chip's vendor and memory type (see module docstring)."""
    mem_factor, gemm_max, half_m, attn, kernel_s, link = VENDOR[hw.vendor]
    blackwell = hw.id in BLACKWELL_DC_GPUS
    return Efficiency(
        mem_bw_fraction=MEM_BW_BY_MEMORY[hw.memory_type] * mem_factor,
        gemm_max=gemm_max,
        gemm_half_m=half_m,
        attn_compute=attn,
        attn_mem=0.85,
        kernel_s=kernel_s,
        link_fraction=link,
        shard_depth_half_k=HOPPER_SHARD_DEPTH_HALF_K if hw.id in HOPPER_GPUS else (),
        gemm_by_dtype=(HOPPER_GEMM_BY_DTYPE if hw.id in HOPPER_GPUS
                       else BLACKWELL_GEMM_BY_DTYPE if blackwell
                       else AMD_GEMM_BY_DTYPE.get(hw.id, {})),
        grouped_kernel_fraction=(BLACKWELL_GROUPED_KERNEL_FRACTION if blackwell
                                 else HOPPER_GROUPED_KERNEL_FRACTION),
        grouped_gemm_max=(BLACKWELL_GROUPED_GEMM_MAX if blackwell
                          else AMD_GROUPED_GEMM_MAX if hw.id in AMD_GEMM_BY_DTYPE else None),
        attn_compute_fa2=BLACKWELL_FA2_ATTN_COMPUTE if blackwell else None,
        linear_attn_chunk_max=BLACKWELL_GDN_CHUNK_EFF_MAX if blackwell else None,
        source=f"defaults for vendor={hw.vendor}, memory={hw.memory_type} (perfmodel/core/efficiency.py)",
    )

"""Rate at which a GEMM streams its weights, relative to the achievable HBM rate
(Efficiency.mem_bw_fraction): by weight format and kernel path (core/roofline.py prices
weight bytes / this fraction)."""

from __future__ import annotations

from perfmodel.core.specs import EngineProfile

# Weight-streaming rate of a dense GEMM whose MMA takes the weights in their stored low-bit
# format (no dequant), relative to the engine's rate for fp8 weights (quant_kernel_efficiency,
# which calibration measures on fp8 GEMMs), by that compute dtype. fp4 (NVFP4/MXFP4 W4A4 on
# fp4 tensor cores): NVIDIA/cutlass issue #2266 (B200, block-scaled GEMM at M=16, K=7168 or
# 2048, > 60 us per call, so far from launch cost): the NVFP4 kernel streams "not much higher
# than 3 TB/s", "close to 4 TB/s" with its best tile (256x64x256, 2 SMs), where the same GEMM
# in MXFP8 is "much closer to 6 TB/s": 4/6 = 0.67. Why: at small M a 128-row MMA tile is
# mostly padding, each CTA walks a long K loop over a few N columns (few CTAs for 148 SMs
# unless split), and the 16-element scale blocks add a second, strided load stream.
# Cross-checks: triton-lang/triton PR #9698 (B200, gpt-oss MoE at 1 token per expert):
# MXFP4 weights 4.51 TB/s vs fp8 weights 5.89 TB/s (0.77); flashinfer issue #1732 (B200,
# flashinfer 0.3.1, M=1 8192x8192 NVFP4 CUTLASS): 1.78 TB/s where fp16 reaches 5-6 TB/s.
# The fused-MoE expert kernels keep their own rate (engine.moe_stream_fraction): this is the
# dense linear kernels' property (cuBLASLt/CUTLASS/trtllm-gen mm_fp4). Other vendors' native
# fp4 GEMMs (MI355X MXFP4) are taken the same: an assumption, no measurement found.
NATIVE_LOWBIT_STREAM_VS_FP8 = {"fp4": 0.67}


def weight_stream_fraction(engine: EngineProfile, quantized: bool, op_dtype: str, *,
                           experts: bool = False) -> float:
    """Share of the achievable HBM rate at which a GEMM streams its weights: 1 for 16-bit
    weights; the engine's low-bit kernel rate (quant_kernel_efficiency) for quantized ones,
    times NATIVE_LOWBIT_STREAM_VS_FP8 of the compute dtype for a dense GEMM that feeds the
    weights straight to the MMA (fp4 on fp4 tensor cores). In (0, 1]."""
    if not quantized:
        return 1.0
    native = 1.0 if experts else NATIVE_LOWBIT_STREAM_VS_FP8.get(op_dtype, 1.0)
    return engine.quant_kernel_efficiency * native
